; ModuleID = 'pw'
source_filename = "pw"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

%pw.par0.ctx = type { float*, float*, float*, float*, i64, i64 }

; Function Attrs: nounwind
define void @pw(i8* nocapture readonly %args) local_unnamed_addr #0 {
entry:
  %pw.par0.ctx.i = alloca %pw.par0.ctx, align 8
  %0 = bitcast i8* %args to <4 x float*>*
  %1 = load <4 x float*>, <4 x float*>* %0, align 8
  %2 = getelementptr inbounds i8, i8* %args, i64 32
  %3 = bitcast i8* %2 to i64*
  %n = load i64, i64* %3, align 8
  %4 = bitcast %pw.par0.ctx* %pw.par0.ctx.i to i8*
  call void @llvm.lifetime.start.p0i8(i64 48, i8* nonnull %4)
  %5 = add i64 %n, 16383
  %shuffle = shufflevector <4 x float*> %1, <4 x float*> poison, <4 x i32> <i32 2, i32 3, i32 0, i32 1>
  %6 = bitcast %pw.par0.ctx* %pw.par0.ctx.i to <4 x float*>*
  store <4 x float*> %shuffle, <4 x float*>* %6, align 8, !noalias !0
  %7 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %pw.par0.ctx.i, i64 0, i32 4
  store i64 %n, i64* %7, align 8, !noalias !0
  %8 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %pw.par0.ctx.i, i64 0, i32 5
  store i64 0, i64* %8, align 8, !noalias !0
  %9 = icmp sgt i64 %5, 16383
  br i1 %9, label %pw.par0.run.i, label %pw.body.exit

pw.par0.run.i:                                    ; preds = %entry
  %10 = lshr i64 %5, 14
  call void @flow_parallel_for(i64 %10, void (i8*, i64, i64)* nonnull @pw.par0.thunk, i8* nonnull %4) #3
  br label %pw.body.exit

pw.body.exit:                                     ; preds = %entry, %pw.par0.run.i
  call void @llvm.lifetime.end.p0i8(i64 48, i8* nonnull %4)
  ret void
}

; Function Attrs: mustprogress nofree nosync nounwind readnone speculatable willreturn
declare float @llvm.fmuladd.f32(float, float, float) #1

; Function Attrs: nofree nosync nounwind
define internal void @pw.par0.thunk(i8* nocapture readonly %0, i64 %1, i64 %2) #2 {
entry:
  %3 = bitcast i8* %0 to float**
  %4 = load float*, float** %3, align 8
  %5 = getelementptr inbounds i8, i8* %0, i64 8
  %6 = bitcast i8* %5 to float**
  %7 = load float*, float** %6, align 8
  %8 = getelementptr inbounds i8, i8* %0, i64 16
  %9 = bitcast i8* %8 to float**
  %10 = load float*, float** %9, align 8
  %11 = getelementptr inbounds i8, i8* %0, i64 24
  %12 = bitcast i8* %11 to float**
  %13 = load float*, float** %12, align 8
  %14 = getelementptr inbounds i8, i8* %0, i64 32
  %15 = bitcast i8* %14 to i64*
  %16 = load i64, i64* %15, align 4
  %17 = getelementptr inbounds i8, i8* %0, i64 40
  %18 = bitcast i8* %17 to i64*
  %19 = load i64, i64* %18, align 4
  tail call void @llvm.experimental.noalias.scope.decl(metadata !6)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !9)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !11)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !13)
  %20 = icmp slt i64 %1, %2
  br i1 %20, label %loop.preheader.i, label %pw.par0.exit

loop.preheader.i:                                 ; preds = %entry
  %21 = add i64 %19, %1
  %.neg.i = mul i64 %21, -16384
  %22 = add i64 %.neg.i, %16
  br label %loop.i

loop.i:                                           ; preds = %loop.end.i, %loop.preheader.i
  %indvar = phi i64 [ %indvar.next, %loop.end.i ], [ 0, %loop.preheader.i ]
  %indvars.iv.i = phi i64 [ %indvars.iv.next.i, %loop.end.i ], [ %22, %loop.preheader.i ]
  %23 = phi i64 [ %125, %loop.end.i ], [ %1, %loop.preheader.i ]
  %24 = mul i64 %indvar, -16384
  %25 = add i64 %22, %24
  %smin = call i64 @llvm.smin.i64(i64 %25, i64 16384)
  %smax = call i64 @llvm.smax.i64(i64 %smin, i64 1)
  %smin.i = tail call i64 @llvm.smin.i64(i64 %indvars.iv.i, i64 16384) #3
  %smax.i = tail call i64 @llvm.smax.i64(i64 %smin.i, i64 1) #3
  %t.i = add nsw i64 %23, %19
  %j0.i = shl i64 %t.i, 14
  %26 = sub i64 %16, %j0.i
  %27 = icmp sgt i64 %26, 0
  br i1 %27, label %loop1.i.preheader, label %loop.end.i

loop1.i.preheader:                                ; preds = %loop.i
  %min.iters.check = icmp ult i64 %smax, 8
  br i1 %min.iters.check, label %loop1.i.preheader3, label %vector.ph

vector.ph:                                        ; preds = %loop1.i.preheader
  %n.vec = and i64 %smax, 9223372036854775800
  br label %vector.body

vector.body:                                      ; preds = %vector.body, %vector.ph
  %index = phi i64 [ 0, %vector.ph ], [ %index.next, %vector.body ]
  %28 = add i64 %index, %j0.i
  %29 = getelementptr inbounds float, float* %13, i64 %28
  %30 = bitcast float* %29 to <8 x float>*
  %wide.load = load <8 x float>, <8 x float>* %30, align 4, !alias.scope !13, !noalias !15
  %31 = getelementptr inbounds float, float* %4, i64 %28
  %32 = bitcast float* %31 to <8 x float>*
  %wide.load1 = load <8 x float>, <8 x float>* %32, align 4, !alias.scope !6, !noalias !16
  %33 = fmul <8 x float> %wide.load, %wide.load1
  %34 = getelementptr inbounds float, float* %7, i64 %28
  %35 = bitcast float* %34 to <8 x float>*
  %wide.load2 = load <8 x float>, <8 x float>* %35, align 4, !alias.scope !9, !noalias !17
  %36 = fadd <8 x float> %33, %wide.load2
  %37 = fneg <8 x float> %36
  %38 = fcmp uno <8 x float> %36, zeroinitializer
  %39 = fcmp ogt <8 x float> %37, <float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000>
  %40 = select <8 x i1> %39, <8 x float> <float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000, float 0x4056333340000000>, <8 x float> %37
  %41 = fcmp olt <8 x float> %40, <float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02>
  %42 = select <8 x i1> %41, <8 x float> <float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, float -1.040000e+02>, <8 x float> %40
  %43 = select <8 x i1> %38, <8 x float> zeroinitializer, <8 x float> %42
  %44 = fmul <8 x float> %43, <float 0x3FF7154760000000, float 0x3FF7154760000000, float 0x3FF7154760000000, float 0x3FF7154760000000, float 0x3FF7154760000000, float 0x3FF7154760000000, float 0x3FF7154760000000, float 0x3FF7154760000000>
  %45 = fadd <8 x float> %44, <float 0x4168000000000000, float 0x4168000000000000, float 0x4168000000000000, float 0x4168000000000000, float 0x4168000000000000, float 0x4168000000000000, float 0x4168000000000000, float 0x4168000000000000>
  %46 = fadd <8 x float> %45, <float 0xC168000000000000, float 0xC168000000000000, float 0xC168000000000000, float 0xC168000000000000, float 0xC168000000000000, float 0xC168000000000000, float 0xC168000000000000, float 0xC168000000000000>
  %47 = call <8 x float> @llvm.fmuladd.v8f32(<8 x float> %46, <8 x float> <float 0xBFE6300000000000, float 0xBFE6300000000000, float 0xBFE6300000000000, float 0xBFE6300000000000, float 0xBFE6300000000000, float 0xBFE6300000000000, float 0xBFE6300000000000, float 0xBFE6300000000000>, <8 x float> %43)
  %48 = call <8 x float> @llvm.fmuladd.v8f32(<8 x float> %46, <8 x float> <float 0x3F2BD01060000000, float 0x3F2BD01060000000, float 0x3F2BD01060000000, float 0x3F2BD01060000000, float 0x3F2BD01060000000, float 0x3F2BD01060000000, float 0x3F2BD01060000000, float 0x3F2BD01060000000>, <8 x float> %47)
  %49 = call <8 x float> @llvm.fmuladd.v8f32(<8 x float> %48, <8 x float> <float 0x3F2A0D2CE0000000, float 0x3F2A0D2CE0000000, float 0x3F2A0D2CE0000000, float 0x3F2A0D2CE0000000, float 0x3F2A0D2CE0000000, float 0x3F2A0D2CE0000000, float 0x3F2A0D2CE0000000, float 0x3F2A0D2CE0000000>, <8 x float> <float 0x3F56E879C0000000, float 0x3F56E879C0000000, float 0x3F56E879C0000000, float 0x3F56E879C0000000, float 0x3F56E879C0000000, float 0x3F56E879C0000000, float 0x3F56E879C0000000, float 0x3F56E879C0000000>)
  %50 = call <8 x float> @llvm.fmuladd.v8f32(<8 x float> %49, <8 x float> %48, <8 x float> <float 0x3F81112100000000, float 0x3F81112100000000, float 0x3F81112100000000, float 0x3F81112100000000, float 0x3F81112100000000, float 0x3F81112100000000, float 0x3F81112100000000, float 0x3F81112100000000>)
  %51 = call <8 x float> @llvm.fmuladd.v8f32(<8 x float> %50, <8 x float> %48, <8 x float> <float 0x3FA5553820000000, float 0x3FA5553820000000, float 0x3FA5553820000000, float 0x3FA5553820000000, float 0x3FA5553820000000, float 0x3FA5553820000000, float 0x3FA5553820000000, float 0x3FA5553820000000>)
  %52 = call <8 x float> @llvm.fmuladd.v8f32(<8 x float> %51, <8 x float> %48, <8 x float> <float 0x3FC5555540000000, float 0x3FC5555540000000, float 0x3FC5555540000000, float 0x3FC5555540000000, float 0x3FC5555540000000, float 0x3FC5555540000000, float 0x3FC5555540000000, float 0x3FC5555540000000>)
  %53 = call <8 x float> @llvm.fmuladd.v8f32(<8 x float> %52, <8 x float> %48, <8 x float> <float 5.000000e-01, float 5.000000e-01, float 5.000000e-01, float 5.000000e-01, float 5.000000e-01, float 5.000000e-01, float 5.000000e-01, float 5.000000e-01>)
  %54 = fmul <8 x float> %48, %48
  %55 = call <8 x float> @llvm.fmuladd.v8f32(<8 x float> %53, <8 x float> %54, <8 x float> %48)
  %56 = fadd <8 x float> %55, <float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00>
  %57 = fptosi <8 x float> %46 to <8 x i32>
  %58 = ashr <8 x i32> %57, <i32 1, i32 1, i32 1, i32 1, i32 1, i32 1, i32 1, i32 1>
  %59 = sub <8 x i32> %57, %58
  %60 = shl <8 x i32> %59, <i32 23, i32 23, i32 23, i32 23, i32 23, i32 23, i32 23, i32 23>
  %61 = add <8 x i32> %60, <i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216>
  %62 = bitcast <8 x i32> %61 to <8 x float>
  %63 = shl <8 x i32> %58, <i32 23, i32 23, i32 23, i32 23, i32 23, i32 23, i32 23, i32 23>
  %64 = add <8 x i32> %63, <i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216, i32 1065353216>
  %65 = bitcast <8 x i32> %64 to <8 x float>
  %66 = fmul <8 x float> %56, %65
  %67 = fmul <8 x float> %66, %62
  %68 = select <8 x i1> %38, <8 x float> %37, <8 x float> %67
  %69 = fadd <8 x float> %68, <float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00>
  %70 = fdiv <8 x float> <float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00, float 1.000000e+00>, %69
  %71 = fmul <8 x float> %wide.load, %70
  %72 = fsub <8 x float> %71, %wide.load1
  %73 = fmul <8 x float> %wide.load2, %72
  %74 = getelementptr inbounds float, float* %10, i64 %28
  %75 = bitcast float* %74 to <8 x float>*
  store <8 x float> %73, <8 x float>* %75, align 4, !alias.scope !11, !noalias !18
  %index.next = add nuw i64 %index, 8
  %76 = icmp eq i64 %index.next, %n.vec
  br i1 %76, label %middle.block, label %vector.body, !llvm.loop !19

middle.block:                                     ; preds = %vector.body
  %cmp.n = icmp eq i64 %smax, %n.vec
  br i1 %cmp.n, label %loop.end.i, label %loop1.i.preheader3

loop1.i.preheader3:                               ; preds = %loop1.i.preheader, %middle.block
  %j.i.ph = phi i64 [ 0, %loop1.i.preheader ], [ %n.vec, %middle.block ]
  br label %loop1.i

loop1.i:                                          ; preds = %loop1.i.preheader3, %loop1.i
  %j.i = phi i64 [ %124, %loop1.i ], [ %j.i.ph, %loop1.i.preheader3 ]
  %77 = add i64 %j.i, %j0.i
  %78 = getelementptr inbounds float, float* %13, i64 %77
  %79 = load float, float* %78, align 4, !alias.scope !13, !noalias !15
  %80 = getelementptr inbounds float, float* %4, i64 %77
  %81 = load float, float* %80, align 4, !alias.scope !6, !noalias !16
  %82 = fmul float %79, %81
  %83 = getelementptr inbounds float, float* %7, i64 %77
  %84 = load float, float* %83, align 4, !alias.scope !9, !noalias !17
  %85 = fadd float %82, %84
  %86 = fneg float %85
  %87 = fcmp uno float %85, 0.000000e+00
  %88 = fcmp ogt float %86, 0x4056333340000000
  %89 = select i1 %88, float 0x4056333340000000, float %86
  %90 = fcmp olt float %89, -1.040000e+02
  %91 = select i1 %90, float -1.040000e+02, float %89
  %92 = select i1 %87, float 0.000000e+00, float %91
  %93 = fmul float %92, 0x3FF7154760000000
  %94 = fadd float %93, 0x4168000000000000
  %95 = fadd float %94, 0xC168000000000000
  %96 = tail call float @llvm.fmuladd.f32(float %95, float 0xBFE6300000000000, float %92) #3
  %97 = tail call float @llvm.fmuladd.f32(float %95, float 0x3F2BD01060000000, float %96) #3
  %98 = tail call float @llvm.fmuladd.f32(float %97, float 0x3F2A0D2CE0000000, float 0x3F56E879C0000000) #3
  %99 = tail call float @llvm.fmuladd.f32(float %98, float %97, float 0x3F81112100000000) #3
  %100 = tail call float @llvm.fmuladd.f32(float %99, float %97, float 0x3FA5553820000000) #3
  %101 = tail call float @llvm.fmuladd.f32(float %100, float %97, float 0x3FC5555540000000) #3
  %102 = tail call float @llvm.fmuladd.f32(float %101, float %97, float 5.000000e-01) #3
  %103 = fmul float %97, %97
  %104 = tail call float @llvm.fmuladd.f32(float %102, float %103, float %97) #3
  %105 = fadd float %104, 1.000000e+00
  %106 = fptosi float %95 to i32
  %107 = ashr i32 %106, 1
  %108 = sub i32 %106, %107
  %109 = shl i32 %108, 23
  %110 = add i32 %109, 1065353216
  %111 = bitcast i32 %110 to float
  %112 = shl i32 %107, 23
  %113 = add i32 %112, 1065353216
  %114 = bitcast i32 %113 to float
  %115 = fmul float %105, %114
  %116 = fmul float %115, %111
  %117 = select i1 %87, float %86, float %116
  %118 = fadd float %117, 1.000000e+00
  %119 = fdiv float 1.000000e+00, %118
  %120 = fmul float %79, %119
  %121 = fsub float %120, %81
  %122 = fmul float %84, %121
  %123 = getelementptr inbounds float, float* %10, i64 %77
  store float %122, float* %123, align 4, !alias.scope !11, !noalias !18
  %124 = add nuw nsw i64 %j.i, 1
  %exitcond.not.i = icmp eq i64 %124, %smax.i
  br i1 %exitcond.not.i, label %loop.end.i, label %loop1.i, !llvm.loop !21

loop.end.i:                                       ; preds = %loop1.i, %middle.block, %loop.i
  %125 = add nsw i64 %23, 1
  %indvars.iv.next.i = add i64 %indvars.iv.i, -16384
  %exitcond3.not.i = icmp eq i64 %125, %2
  %indvar.next = add i64 %indvar, 1
  br i1 %exitcond3.not.i, label %pw.par0.exit, label %loop.i

pw.par0.exit:                                     ; preds = %loop.end.i, %entry
  ret void
}

; Function Attrs: nounwind
declare void @flow_parallel_for(i64, void (i8*, i64, i64)*, i8*) local_unnamed_addr #3

; Function Attrs: nofree nosync nounwind readnone speculatable willreturn
declare i64 @llvm.smin.i64(i64, i64) #4

; Function Attrs: nofree nosync nounwind readnone speculatable willreturn
declare i64 @llvm.smax.i64(i64, i64) #4

; Function Attrs: inaccessiblememonly nofree nosync nounwind willreturn
declare void @llvm.experimental.noalias.scope.decl(metadata) #5

; Function Attrs: argmemonly nofree nosync nounwind willreturn
declare void @llvm.lifetime.start.p0i8(i64 immarg, i8* nocapture) #6

; Function Attrs: argmemonly nofree nosync nounwind willreturn
declare void @llvm.lifetime.end.p0i8(i64 immarg, i8* nocapture) #6

; Function Attrs: nofree nosync nounwind readnone speculatable willreturn
declare <8 x float> @llvm.fmuladd.v8f32(<8 x float>, <8 x float>, <8 x float>) #4

attributes #0 = { nounwind "target-cpu"="rocketlake" "target-features"="+64bit,+adx,+aes,+amx-bf16,+amx-int8,+amx-tile,+avx,+avx2,+avx512bf16,+avx512bitalg,+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512fp16,+avx512ifma,+avx512vbmi,+avx512vbmi2,+avx512vl,+avx512vnni,+avx512vpopcntdq,+avxvnni,+bmi,+bmi2,+cldemote,+clflushopt,+clwb,+cmov,+crc32,+cx16,+cx8,+f16c,+fma,+fsgsbase,+fxsr,+gfni,+invpcid,+lzcnt,+mmx,+movbe,+movdir64b,+movdiri,+pclmul,+popcnt,+prfchw,+rdpid,+rdrnd,+rdseed,+rtm,+sahf,+serialize,+sha,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+tsxldtrk,+vaes,+vpclmulqdq,+xsave,+xsavec,+xsaveopt,+xsaves,-avx512er,-avx512pf,-avx512vp2intersect,-clzero,-enqcmd,-fma4,-hreset,-kl,-lwp,-mwaitx,-pconfig,-pku,-prefetchwt1,-ptwrite,-sgx,-shstk,-sse4a,-tbm,-uintr,-waitpkg,-wbnoinvd,-widekl,-xop" }
attributes #1 = { mustprogress nofree nosync nounwind readnone speculatable willreturn }
attributes #2 = { nofree nosync nounwind "target-cpu"="rocketlake" "target-features"="+64bit,+adx,+aes,+amx-bf16,+amx-int8,+amx-tile,+avx,+avx2,+avx512bf16,+avx512bitalg,+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512fp16,+avx512ifma,+avx512vbmi,+avx512vbmi2,+avx512vl,+avx512vnni,+avx512vpopcntdq,+avxvnni,+bmi,+bmi2,+cldemote,+clflushopt,+clwb,+cmov,+crc32,+cx16,+cx8,+f16c,+fma,+fsgsbase,+fxsr,+gfni,+invpcid,+lzcnt,+mmx,+movbe,+movdir64b,+movdiri,+pclmul,+popcnt,+prfchw,+rdpid,+rdrnd,+rdseed,+rtm,+sahf,+serialize,+sha,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+tsxldtrk,+vaes,+vpclmulqdq,+xsave,+xsavec,+xsaveopt,+xsaves,-avx512er,-avx512pf,-avx512vp2intersect,-clzero,-enqcmd,-fma4,-hreset,-kl,-lwp,-mwaitx,-pconfig,-pku,-prefetchwt1,-ptwrite,-sgx,-shstk,-sse4a,-tbm,-uintr,-waitpkg,-wbnoinvd,-widekl,-xop" }
attributes #3 = { nounwind }
attributes #4 = { nofree nosync nounwind readnone speculatable willreturn }
attributes #5 = { inaccessiblememonly nofree nosync nounwind willreturn }
attributes #6 = { argmemonly nofree nosync nounwind willreturn }

!0 = !{!1, !3, !4, !5}
!1 = distinct !{!1, !2, !"pw.body: %out"}
!2 = distinct !{!2, !"pw.body"}
!3 = distinct !{!3, !2, !"pw.body: %x"}
!4 = distinct !{!4, !2, !"pw.body: %a"}
!5 = distinct !{!5, !2, !"pw.body: %b"}
!6 = !{!7}
!7 = distinct !{!7, !8, !"pw.par0: %a"}
!8 = distinct !{!8, !"pw.par0"}
!9 = !{!10}
!10 = distinct !{!10, !8, !"pw.par0: %b"}
!11 = !{!12}
!12 = distinct !{!12, !8, !"pw.par0: %out"}
!13 = !{!14}
!14 = distinct !{!14, !8, !"pw.par0: %x"}
!15 = !{!7, !10, !12}
!16 = !{!10, !12, !14}
!17 = !{!7, !12, !14}
!18 = !{!7, !10, !14}
!19 = distinct !{!19, !20}
!20 = !{!"llvm.loop.isvectorized", i32 1}
!21 = distinct !{!21, !22, !20}
!22 = !{!"llvm.loop.unroll.runtime.disable"}
