	.text
	.file	"pw"
	.globl	pw
	.p2align	4, 0x90
	.type	pw,@function
pw:
	subq	$56, %rsp
	movq	%rdi, %rax
	movq	32(%rdi), %rdi
	vpermpd	$78, (%rax), %ymm0
	vmovups	%ymm0, 8(%rsp)
	movq	%rdi, 40(%rsp)
	addq	$16383, %rdi
	movq	$0, 48(%rsp)
	cmpq	$16384, %rdi
	jl	.LBB0_2
	shrq	$14, %rdi
	leaq	pw.par0.thunk(%rip), %rsi
	leaq	8(%rsp), %rdx
	vzeroupper
	callq	flow_parallel_for@PLT
.LBB0_2:
	addq	$56, %rsp
	vzeroupper
	retq
.Lfunc_end0:
	.size	pw, .Lfunc_end0-pw

	.section	.rodata.cst4,"aM",@progbits,4
	.p2align	2
.LCPI1_0:
	.long	0x80000000
.LCPI1_1:
	.long	0x42b1999a
.LCPI1_2:
	.long	0xc2d00000
.LCPI1_3:
	.long	0x3fb8aa3b
.LCPI1_4:
	.long	0x4b400000
.LCPI1_5:
	.long	0xcb400000
.LCPI1_6:
	.long	0xbf318000
.LCPI1_7:
	.long	0x395e8083
.LCPI1_8:
	.long	0x39506967
.LCPI1_9:
	.long	0x3ab743ce
.LCPI1_10:
	.long	0x3c088908
.LCPI1_11:
	.long	0x3d2aa9c1
.LCPI1_12:
	.long	0x3e2aaaaa
.LCPI1_13:
	.long	0x3f000000
.LCPI1_14:
	.long	0x3f800000
	.text
	.p2align	4, 0x90
	.type	pw.par0.thunk,@function
pw.par0.thunk:
	pushq	%rbp
	pushq	%r15
	pushq	%r14
	pushq	%r13
	pushq	%r12
	pushq	%rbx
	subq	$152, %rsp
	movq	%rdx, -64(%rsp)
	cmpq	%rdx, %rsi
	jge	.LBB1_11
	movq	(%rdi), %r8
	movq	8(%rdi), %rcx
	movq	16(%rdi), %rdx
	movq	24(%rdi), %rbp
	movq	32(%rdi), %r12
	movq	40(%rdi), %rax
	movq	%rax, %rdi
	movq	%rax, -80(%rsp)
	leaq	(%rax,%rsi), %r13
	movq	%r13, %rax
	shlq	$14, %rax
	movq	%r12, -72(%rsp)
	movq	%rax, -128(%rsp)
	subq	%rax, %r12
	shlq	$16, %r13
	movq	%rdx, -112(%rsp)
	leaq	(%rdx,%r13), %r9
	movq	%rcx, -104(%rsp)
	leaq	(%rcx,%r13), %r10
	movq	%r8, -96(%rsp)
	addq	%r13, %r8
	movq	%rbp, -120(%rsp)
	addq	%rbp, %r13
	xorl	%eax, %eax
	vbroadcastss	.LCPI1_0(%rip), %xmm16
	vmovss	.LCPI1_1(%rip), %xmm8
	vmovss	.LCPI1_2(%rip), %xmm9
	vxorps	%xmm10, %xmm10, %xmm10
	vmovss	.LCPI1_3(%rip), %xmm11
	vmovss	.LCPI1_4(%rip), %xmm12
	vmovss	.LCPI1_5(%rip), %xmm14
	vmovss	.LCPI1_6(%rip), %xmm15
	vmovss	.LCPI1_7(%rip), %xmm24
	vmovss	.LCPI1_8(%rip), %xmm31
	vmovss	.LCPI1_9(%rip), %xmm1
	vmovss	.LCPI1_14(%rip), %xmm17
	vbroadcastss	.LCPI1_0(%rip), %ymm0
	vmovups	%ymm0, 112(%rsp)
	vbroadcastss	.LCPI1_1(%rip), %ymm0
	vmovups	%ymm0, 80(%rsp)
	vbroadcastss	.LCPI1_2(%rip), %ymm0
	vmovups	%ymm0, 48(%rsp)
	vbroadcastss	.LCPI1_3(%rip), %ymm0
	vmovups	%ymm0, 16(%rsp)
	vbroadcastss	.LCPI1_4(%rip), %ymm0
	vmovups	%ymm0, -16(%rsp)
	vbroadcastss	.LCPI1_5(%rip), %ymm0
	vmovups	%ymm0, -48(%rsp)
	vbroadcastss	.LCPI1_6(%rip), %ymm22
	vbroadcastss	.LCPI1_7(%rip), %ymm23
	vbroadcastss	.LCPI1_8(%rip), %ymm13
	vbroadcastss	.LCPI1_9(%rip), %ymm25
	vbroadcastss	.LCPI1_10(%rip), %ymm26
	vbroadcastss	.LCPI1_11(%rip), %ymm27
	vxorps	%xmm28, %xmm28, %xmm28
	vbroadcastss	.LCPI1_12(%rip), %ymm29
	vbroadcastss	.LCPI1_13(%rip), %ymm30
	movq	%r12, -88(%rsp)
	jmp	.LBB1_2
	.p2align	4, 0x90
.LBB1_10:
	incq	%rsi
	addq	$-16384, %r12
	movq	-56(%rsp), %rax
	incq	%rax
	addq	$65536, %r9
	addq	$65536, %r10
	addq	$65536, %r8
	addq	$65536, %r13
	addq	$16384, -128(%rsp)
	cmpq	-64(%rsp), %rsi
	je	.LBB1_11
.LBB1_2:
	cmpq	$16384, %r12
	movl	$16384, %r11d
	cmovlq	%r12, %r11
	cmpq	$2, %r11
	movl	$1, %ecx
	cmovlq	%rcx, %r11
	movq	%rax, -56(%rsp)
	shlq	$14, %rax
	movq	-88(%rsp), %r14
	subq	%rax, %r14
	cmpq	$16384, %r14
	movl	$16384, %eax
	cmovgeq	%rax, %r14
	cmpq	$2, %r14
	cmovlq	%rcx, %r14
	movq	-80(%rsp), %rax
	addq	%rsi, %rax
	shlq	$14, %rax
	movq	-72(%rsp), %rcx
	subq	%rax, %rcx
	testq	%rcx, %rcx
	jle	.LBB1_10
	cmpq	$8, %r14
	jae	.LBB1_5
	xorl	%r15d, %r15d
	vmovss	.LCPI1_10(%rip), %xmm18
	vmovss	.LCPI1_11(%rip), %xmm19
	vmovss	.LCPI1_12(%rip), %xmm20
	vmovss	.LCPI1_13(%rip), %xmm21
	jmp	.LBB1_8
	.p2align	4, 0x90
.LBB1_5:
	vmovaps	%xmm15, %xmm5
	vmovaps	%xmm14, %xmm4
	vmovaps	%xmm12, %xmm3
	vmovaps	%xmm11, %xmm2
	vmovaps	%xmm9, %xmm1
	vmovaps	%xmm8, %xmm0
	movl	%r11d, %eax
	andl	$32760, %eax
	movq	%r14, %r15
	movabsq	$9223372036854775800, %rcx
	andq	%rcx, %r15
	xorl	%ecx, %ecx
	vmovups	112(%rsp), %ymm18
	vmovups	80(%rsp), %ymm19
	vmovups	48(%rsp), %ymm20
	vmovups	16(%rsp), %ymm21
	vmovups	-16(%rsp), %ymm7
	vmovups	-48(%rsp), %ymm6
	.p2align	4, 0x90
.LBB1_6:
	vmovups	(%r13,%rcx,4), %ymm31
	vmovups	(%r8,%rcx,4), %ymm8
	vmulps	%ymm8, %ymm31, %ymm9
	vmovups	(%r10,%rcx,4), %ymm10
	vaddps	%ymm10, %ymm9, %ymm9
	vxorps	%ymm18, %ymm9, %ymm11
	vcmpunordps	%ymm28, %ymm9, %k1
	vminps	%ymm11, %ymm19, %ymm9
	vmaxps	%ymm9, %ymm20, %ymm9
	vmovaps	%ymm28, %ymm9 {%k1}
	vmulps	%ymm21, %ymm9, %ymm12
	vaddps	%ymm7, %ymm12, %ymm12
	vaddps	%ymm6, %ymm12, %ymm12
	vfmadd231ps	%ymm22, %ymm12, %ymm9
	vfmadd231ps	%ymm23, %ymm12, %ymm9
	vmovaps	%ymm13, %ymm24
	vfmadd213ps	%ymm25, %ymm9, %ymm24
	vfmadd213ps	%ymm26, %ymm9, %ymm24
	vfmadd213ps	%ymm27, %ymm9, %ymm24
	vfmadd213ps	%ymm29, %ymm9, %ymm24
	vfmadd213ps	%ymm30, %ymm9, %ymm24
	vmulps	%ymm9, %ymm9, %ymm14
	vfmadd213ps	%ymm9, %ymm24, %ymm14
	vbroadcastss	.LCPI1_14(%rip), %ymm9
	vaddps	%ymm9, %ymm14, %ymm14
	vcvttps2dq	%ymm12, %ymm12
	vpsrad	$1, %ymm12, %ymm24
	vpsubd	%ymm24, %ymm12, %ymm12
	vpslld	$23, %ymm12, %ymm12
	vpbroadcastd	.LCPI1_14(%rip), %ymm15
	vpaddd	%ymm15, %ymm12, %ymm12
	vpslld	$23, %ymm24, %ymm24
	vpaddd	%ymm15, %ymm24, %ymm15
	vmulps	%ymm15, %ymm14, %ymm14
	vmulps	%ymm12, %ymm14, %ymm12
	vmovaps	%ymm11, %ymm12 {%k1}
	vaddps	%ymm9, %ymm12, %ymm11
	vdivps	%ymm11, %ymm9, %ymm9
	vmulps	%ymm9, %ymm31, %ymm9
	vsubps	%ymm8, %ymm9, %ymm8
	vmulps	%ymm8, %ymm10, %ymm8
	vmovups	%ymm8, (%r9,%rcx,4)
	addq	$8, %rcx
	cmpq	%rcx, %rax
	jne	.LBB1_6
	cmpq	%r15, %r14
	vmovaps	%xmm0, %xmm8
	vmovaps	%xmm1, %xmm9
	vxorps	%xmm10, %xmm10, %xmm10
	vmovaps	%xmm2, %xmm11
	vmovaps	%xmm3, %xmm12
	vmovaps	%xmm4, %xmm14
	vmovaps	%xmm5, %xmm15
	vmovss	.LCPI1_7(%rip), %xmm24
	vmovss	.LCPI1_8(%rip), %xmm31
	vmovss	.LCPI1_9(%rip), %xmm1
	vmovss	.LCPI1_10(%rip), %xmm18
	vmovss	.LCPI1_11(%rip), %xmm19
	vmovss	.LCPI1_12(%rip), %xmm20
	vmovss	.LCPI1_13(%rip), %xmm21
	je	.LBB1_10
.LBB1_8:
	subq	%r15, %r11
	addq	-128(%rsp), %r15
	movq	-112(%rsp), %rax
	leaq	(%rax,%r15,4), %r14
	movq	-104(%rsp), %rax
	leaq	(%rax,%r15,4), %rdi
	movq	-96(%rsp), %rax
	leaq	(%rax,%r15,4), %rcx
	movq	-120(%rsp), %rax
	leaq	(%rax,%r15,4), %rdx
	xorl	%eax, %eax
	.p2align	4, 0x90
.LBB1_9:
	vmovss	(%rdx,%rax,4), %xmm3
	vmovss	(%rcx,%rax,4), %xmm4
	vmulss	%xmm4, %xmm3, %xmm2
	vmovss	(%rdi,%rax,4), %xmm5
	vaddss	%xmm5, %xmm2, %xmm2
	vxorps	%xmm16, %xmm2, %xmm6
	vucomiss	%xmm2, %xmm2
	setp	%bl
	vminss	%xmm6, %xmm8, %xmm2
	vmaxss	%xmm2, %xmm9, %xmm2
	kmovd	%ebx, %k1
	vmovss	%xmm10, %xmm2, %xmm2 {%k1}
	vmulss	%xmm2, %xmm11, %xmm7
	vaddss	%xmm7, %xmm12, %xmm7
	vaddss	%xmm7, %xmm14, %xmm7
	vfmadd231ss	%xmm15, %xmm7, %xmm2
	vfmadd231ss	%xmm24, %xmm7, %xmm2
	vmovaps	%xmm31, %xmm0
	vfmadd213ss	%xmm1, %xmm2, %xmm0
	vfmadd213ss	%xmm18, %xmm2, %xmm0
	vfmadd213ss	%xmm19, %xmm2, %xmm0
	vfmadd213ss	%xmm20, %xmm2, %xmm0
	vfmadd213ss	%xmm21, %xmm2, %xmm0
	vmulss	%xmm2, %xmm2, %xmm1
	vfmadd213ss	%xmm2, %xmm0, %xmm1
	vaddss	%xmm17, %xmm1, %xmm0
	vcvttss2si	%xmm7, %ebx
	movl	%ebx, %ebp
	sarl	%ebp
	subl	%ebp, %ebx
	shll	$23, %ebx
	addl	$1065353216, %ebx
	vmovd	%ebx, %xmm1
	shll	$23, %ebp
	addl	$1065353216, %ebp
	vmovd	%ebp, %xmm2
	vmulss	%xmm2, %xmm0, %xmm0
	vmulss	%xmm1, %xmm0, %xmm0
	vmovss	.LCPI1_9(%rip), %xmm1
	vmovss	%xmm6, %xmm0, %xmm0 {%k1}
	vaddss	%xmm17, %xmm0, %xmm0
	vdivss	%xmm0, %xmm17, %xmm0
	vmulss	%xmm0, %xmm3, %xmm0
	vsubss	%xmm4, %xmm0, %xmm0
	vmulss	%xmm0, %xmm5, %xmm0
	vmovss	%xmm0, (%r14,%rax,4)
	incq	%rax
	cmpq	%rax, %r11
	jne	.LBB1_9
	jmp	.LBB1_10
.LBB1_11:
	addq	$152, %rsp
	popq	%rbx
	popq	%r12
	popq	%r13
	popq	%r14
	popq	%r15
	popq	%rbp
	vzeroupper
	retq
.Lfunc_end1:
	.size	pw.par0.thunk, .Lfunc_end1-pw.par0.thunk

	.section	".note.GNU-stack","",@progbits
