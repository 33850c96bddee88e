// SPDX-License-Identifier: Apache-2.0
/* Execution backend (issue 29): every successful exec with its filename and bounded argv. */
#include "common.h"

#define FILENAME_LEN 256
#define ARGV_LEN 512

struct exec_record {
	struct head head;
	__u32 argv_len;
	__u32 pad;
	char filename[FILENAME_LEN];
	/* NUL-separated, as in /proc/<pid>/cmdline, cut at ARGV_LEN bytes. */
	char argv[ARGV_LEN];
};

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct exec_record *r = bpf_ringbuf_reserve(&ring, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_head(&r->head);
	bpf_probe_read_kernel_str(r->filename, sizeof(r->filename), BPF_CORE_READ(bprm, filename));
	struct mm_struct *mm = BPF_CORE_READ(p, mm);
	unsigned long start = BPF_CORE_READ(mm, arg_start);
	unsigned long end = BPF_CORE_READ(mm, arg_end);
	unsigned long len = end > start ? end - start : 0;
	/* One byte short of the buffer: the mask keeps the verifier's bound. */
	if (len > ARGV_LEN - 1)
		len = ARGV_LEN - 1;
	len &= ARGV_LEN - 1;
	r->argv_len = 0;
	r->pad = 0;
	if (len > 0 && bpf_probe_read_user(r->argv, len, (void *)start) == 0)
		r->argv_len = len;
	bpf_ringbuf_submit(r, 0);
	return 0;
}
