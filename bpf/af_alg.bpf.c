// SPDX-License-Identifier: Apache-2.0
/* AF_ALG backend (issue 29): socket(AF_ALG, ...) by any process. */
#include "common.h"

struct alg_record {
	struct head head;
	__u32 family;
	__u32 type;
};

SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long id)
{
	if (id != NR_SOCKET)
		return 0;
	if ((int)PT_REGS_PARM1_CORE_SYSCALL(regs) != AF_ALG)
		return 0;
	struct alg_record *r = bpf_ringbuf_reserve(&ring, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_head(&r->head);
	r->family = AF_ALG;
	r->type = (__u32)PT_REGS_PARM2_CORE_SYSCALL(regs);
	bpf_ringbuf_submit(r, 0);
	return 0;
}
