; ModuleID = 'pw'
source_filename = "pw"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

%pw.par0.ctx = type { float*, float*, float*, float*, i64, i64 }

; Function Attrs: nounwind
define void @pw(i8* %args) #0 {
entry:
  %0 = bitcast i8* %args to i64*
  %1 = getelementptr inbounds i64, i64* %0, i64 0
  %2 = bitcast i64* %1 to i8**
  %out = load i8*, i8** %2, align 8
  %3 = bitcast i8* %out to float*
  %4 = bitcast i8* %args to i64*
  %5 = getelementptr inbounds i64, i64* %4, i64 1
  %6 = bitcast i64* %5 to i8**
  %x = load i8*, i8** %6, align 8
  %7 = bitcast i8* %x to float*
  %8 = bitcast i8* %args to i64*
  %9 = getelementptr inbounds i64, i64* %8, i64 2
  %10 = bitcast i64* %9 to i8**
  %a = load i8*, i8** %10, align 8
  %11 = bitcast i8* %a to float*
  %12 = bitcast i8* %args to i64*
  %13 = getelementptr inbounds i64, i64* %12, i64 3
  %14 = bitcast i64* %13 to i8**
  %b = load i8*, i8** %14, align 8
  %15 = bitcast i8* %b to float*
  %16 = bitcast i8* %args to i64*
  %17 = getelementptr inbounds i64, i64* %16, i64 4
  %n = load i64, i64* %17, align 8
  call void @pw.body(float* %3, float* %7, float* %11, float* %15, i64 %n)
  ret void
}

; Function Attrs: nounwind
define internal void @pw.body(float* noalias %out, float* noalias %x, float* noalias %a, float* noalias %b, i64 %n) #0 {
entry:
  %pw.par0.ctx = alloca %pw.par0.ctx, align 8
  %0 = add i64 %n, 16383
  %1 = sdiv i64 %0, 16384
  %2 = sub i64 0, %0
  %3 = select i1 false, i64 %2, i64 %1
  %4 = select i1 false, i64 0, i64 %3
  %5 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %pw.par0.ctx, i32 0, i32 0
  store float* %a, float** %5, align 8
  %6 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %pw.par0.ctx, i32 0, i32 1
  store float* %b, float** %6, align 8
  %7 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %pw.par0.ctx, i32 0, i32 2
  store float* %out, float** %7, align 8
  %8 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %pw.par0.ctx, i32 0, i32 3
  store float* %x, float** %8, align 8
  %9 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %pw.par0.ctx, i32 0, i32 4
  store i64 %n, i64* %9, align 4
  %10 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %pw.par0.ctx, i32 0, i32 5
  store i64 0, i64* %10, align 4
  %11 = icmp sgt i64 %4, 0
  br i1 %11, label %pw.par0.run, label %pw.par0.done

pw.par0.run:                                      ; preds = %entry
  %12 = bitcast %pw.par0.ctx* %pw.par0.ctx to i8*
  call void @flow_parallel_for(i64 %4, void (i8*, i64, i64)* @pw.par0.thunk, i8* %12)
  br label %pw.par0.done

pw.par0.done:                                     ; preds = %pw.par0.run, %entry
  ret void
}

; Function Attrs: nounwind
define internal void @pw.par0(float* noalias %a, float* noalias %b, float* noalias %out, float* noalias %x, i64 %n, i64 %min, i64 %begin, i64 %end) #0 {
entry:
  %0 = icmp slt i64 %begin, %end
  br i1 %0, label %loop, label %loop.end2

loop:                                             ; preds = %loop.end, %entry
  %1 = phi i64 [ %begin, %entry ], [ %67, %loop.end ]
  %t = add nsw i64 %min, %1
  %j0 = mul i64 %t, 16384
  %2 = sub i64 %n, %j0
  %3 = icmp slt i64 %2, 16384
  %jn = select i1 %3, i64 %2, i64 16384
  %4 = add i64 0, %jn
  %5 = icmp slt i64 0, %4
  br i1 %5, label %loop1, label %loop.end

loop1:                                            ; preds = %loop1, %loop
  %j = phi i64 [ 0, %loop ], [ %65, %loop1 ]
  %6 = add i64 %j0, %j
  %7 = getelementptr inbounds float, float* %x, i64 %6
  %8 = load float, float* %7, align 4
  %9 = add i64 %j0, %j
  %10 = getelementptr inbounds float, float* %a, i64 %9
  %11 = load float, float* %10, align 4
  %12 = fmul float %8, %11
  %13 = add i64 %j0, %j
  %14 = getelementptr inbounds float, float* %b, i64 %13
  %15 = load float, float* %14, align 4
  %16 = fadd float %12, %15
  %17 = fneg float %16
  %18 = fcmp uno float %17, %17
  %19 = fcmp ogt float %17, 0x4056333340000000
  %20 = select i1 %19, float 0x4056333340000000, float %17
  %21 = fcmp olt float %20, -1.040000e+02
  %22 = select i1 %21, float -1.040000e+02, float %20
  %23 = select i1 %18, float 0.000000e+00, float %22
  %24 = fmul float %23, 0x3FF7154760000000
  %25 = fadd float %24, 0x4168000000000000
  %26 = fsub float %25, 0x4168000000000000
  %27 = call float @llvm.fmuladd.f32(float %26, float 0xBFE6300000000000, float %23)
  %28 = call float @llvm.fmuladd.f32(float %26, float 0x3F2BD01060000000, float %27)
  %29 = call float @llvm.fmuladd.f32(float 0x3F2A0D2CE0000000, float %28, float 0x3F56E879C0000000)
  %30 = call float @llvm.fmuladd.f32(float %29, float %28, float 0x3F81112100000000)
  %31 = call float @llvm.fmuladd.f32(float %30, float %28, float 0x3FA5553820000000)
  %32 = call float @llvm.fmuladd.f32(float %31, float %28, float 0x3FC5555540000000)
  %33 = call float @llvm.fmuladd.f32(float %32, float %28, float 5.000000e-01)
  %34 = fmul float %28, %28
  %35 = call float @llvm.fmuladd.f32(float %33, float %34, float %28)
  %36 = fadd float %35, 1.000000e+00
  %37 = fptosi float %26 to i32
  %38 = ashr i32 %37, 1
  %39 = sub i32 %37, %38
  %40 = add i32 %39, 127
  %41 = shl i32 %40, 23
  %42 = bitcast i32 %41 to float
  %43 = add i32 %38, 127
  %44 = shl i32 %43, 23
  %45 = bitcast i32 %44 to float
  %46 = fmul float %36, %45
  %47 = fmul float %46, %42
  %48 = select i1 %18, float %17, float %47
  %49 = fadd float 1.000000e+00, %48
  %50 = fdiv float 1.000000e+00, %49
  %51 = add i64 %j0, %j
  %52 = getelementptr inbounds float, float* %x, i64 %51
  %53 = load float, float* %52, align 4
  %54 = fmul float %50, %53
  %55 = add i64 %j0, %j
  %56 = getelementptr inbounds float, float* %a, i64 %55
  %57 = load float, float* %56, align 4
  %58 = fsub float %54, %57
  %59 = add i64 %j0, %j
  %60 = getelementptr inbounds float, float* %b, i64 %59
  %61 = load float, float* %60, align 4
  %62 = fmul float %58, %61
  %63 = add i64 %j0, %j
  %64 = getelementptr inbounds float, float* %out, i64 %63
  store float %62, float* %64, align 4
  %65 = add nsw i64 %j, 1
  %66 = icmp slt i64 %65, %4
  br i1 %66, label %loop1, label %loop.end, !llvm.loop !0

loop.end:                                         ; preds = %loop1, %loop
  %67 = add nsw i64 %1, 1
  %68 = icmp slt i64 %67, %end
  br i1 %68, label %loop, label %loop.end2

loop.end2:                                        ; preds = %loop.end, %entry
  ret void
}

; Function Attrs: nofree nosync nounwind readnone speculatable willreturn
declare float @llvm.fmuladd.f32(float, float, float) #1

; Function Attrs: nounwind
define internal void @pw.par0.thunk(i8* %0, i64 %1, i64 %2) #0 {
entry:
  %3 = bitcast i8* %0 to %pw.par0.ctx*
  %4 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %3, i32 0, i32 0
  %5 = load float*, float** %4, align 8
  %6 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %3, i32 0, i32 1
  %7 = load float*, float** %6, align 8
  %8 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %3, i32 0, i32 2
  %9 = load float*, float** %8, align 8
  %10 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %3, i32 0, i32 3
  %11 = load float*, float** %10, align 8
  %12 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %3, i32 0, i32 4
  %13 = load i64, i64* %12, align 4
  %14 = getelementptr inbounds %pw.par0.ctx, %pw.par0.ctx* %3, i32 0, i32 5
  %15 = load i64, i64* %14, align 4
  call void @pw.par0(float* %5, float* %7, float* %9, float* %11, i64 %13, i64 %15, i64 %1, i64 %2)
  ret void
}

; Function Attrs: nounwind
declare void @flow_parallel_for(i64, void (i8*, i64, i64)*, i8*) #2

attributes #0 = { nounwind "target-cpu"="rocketlake" "target-features"="+64bit,+adx,+aes,+amx-bf16,+amx-int8,+amx-tile,+avx,+avx2,+avx512bf16,+avx512bitalg,+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512fp16,+avx512ifma,+avx512vbmi,+avx512vbmi2,+avx512vl,+avx512vnni,+avx512vpopcntdq,+avxvnni,+bmi,+bmi2,+cldemote,+clflushopt,+clwb,+cmov,+crc32,+cx16,+cx8,+f16c,+fma,+fsgsbase,+fxsr,+gfni,+invpcid,+lzcnt,+mmx,+movbe,+movdir64b,+movdiri,+pclmul,+popcnt,+prfchw,+rdpid,+rdrnd,+rdseed,+rtm,+sahf,+serialize,+sha,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+tsxldtrk,+vaes,+vpclmulqdq,+xsave,+xsavec,+xsaveopt,+xsaves,-avx512er,-avx512pf,-avx512vp2intersect,-clzero,-enqcmd,-fma4,-hreset,-kl,-lwp,-mwaitx,-pconfig,-pku,-prefetchwt1,-ptwrite,-sgx,-shstk,-sse4a,-tbm,-uintr,-waitpkg,-wbnoinvd,-widekl,-xop" }
attributes #1 = { nofree nosync nounwind readnone speculatable willreturn }
attributes #2 = { nounwind }

!0 = distinct !{!0, !1}
!1 = !{!"llvm.loop.vectorize.enable", i1 true}
