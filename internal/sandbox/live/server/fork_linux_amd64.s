#include "textflag.h"

// func cloneInit(flags, stack uintptr, r *rawCmd) (pid, errno uintptr)
TEXT ·cloneInit(SB),NOSPLIT|NOFRAME,$0-40
	MOVQ	flags+0(FP), DI
	MOVQ	stack+8(FP), SI
	MOVQ	$0, DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	r+16(FP), R13
	MOVQ	$56, AX // clone
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, pid+24(FP)
	NEGQ	AX
	MOVQ	AX, errno+32(FP)
	RET
ok:
	MOVQ	AX, pid+24(FP)
	MOVQ	$0, errno+32(FP)
	RET
child:
	// On the new stack; the child never returns.
	SUBQ	$16, SP
	MOVQ	R13, 0(SP)
	CALL	·commandInit(SB)
	MOVQ	$125, DI
	MOVQ	$231, AX // exit_group
	SYSCALL
	JMP	child

// func cloneShell(flags, stack uintptr, r *rawCmd) (pid, errno uintptr)
TEXT ·cloneShell(SB),NOSPLIT|NOFRAME,$0-40
	MOVQ	flags+0(FP), DI
	MOVQ	stack+8(FP), SI
	MOVQ	$0, DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	r+16(FP), R13
	MOVQ	$56, AX // clone
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, pid+24(FP)
	NEGQ	AX
	MOVQ	AX, errno+32(FP)
	RET
ok:
	MOVQ	AX, pid+24(FP)
	MOVQ	$0, errno+32(FP)
	RET
child:
	SUBQ	$16, SP
	MOVQ	R13, 0(SP)
	CALL	·commandShell(SB)
	MOVQ	$125, DI
	MOVQ	$231, AX // exit_group
	SYSCALL
	JMP	child
