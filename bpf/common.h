/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the probe programs (issue 29): the record header, the ring and the drop counter.
 * Record layouts are read by src/probes/record.rs; change both together. */
#ifndef SVC_COMMON_H
#define SVC_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

#define COMM_LEN 16
/* 256 KiB per backend: a page multiple and a power of two, as BPF_MAP_TYPE_RINGBUF requires. */
#define RING_BYTES (256 * 1024)

#define AF_INET 2
#define AF_INET6 10
#define AF_ALG 38
#define IPPROTO_TCP 6

#if defined(__TARGET_ARCH_x86)
#define NR_OPEN 2
#define NR_SOCKET 41
#define NR_ACCEPT 43
#define NR_OPENAT 257
#define NR_ACCEPT4 288
#define NR_OPENAT2 437
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define NR_OPEN (-1)
#define NR_SOCKET 198
#define NR_ACCEPT 202
#define NR_OPENAT 56
#define NR_ACCEPT4 242
#define NR_OPENAT2 437
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, syscallno)
#else
#error "kernel probes: unsupported architecture"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} ring SEC(".maps");

/* Records lost because the ring was full, counted where they are lost (per CPU, summed by the
 * reader). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

static __always_inline void count_drop(void)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&drops, &key);
	if (n)
		*n += 1;
}

#define ANCESTORS 8

/* One process of the chain above the actor, read in the kernel so a chain whose processes
 * exit at once (a shell running curl) is still whole when userspace reads the record. */
struct ancestor {
	__u32 pid;
	__u32 uid;
	char comm[COMM_LEN];
};

/* Common head of every record: who did it, and the parents up to ANCESTORS (pid 0 ends). */
struct head {
	__u32 pid;
	__u32 ppid;
	__u32 uid;
	__u32 pad;
	__u64 cgroup;
	char comm[COMM_LEN];
	struct ancestor up[ANCESTORS];
};

static __always_inline void fill_head(struct head *h)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	h->pid = bpf_get_current_pid_tgid() >> 32;
	h->ppid = BPF_CORE_READ(task, real_parent, tgid);
	h->uid = (__u32)bpf_get_current_uid_gid();
	h->pad = 0;
	h->cgroup = bpf_get_current_cgroup_id();
	bpf_get_current_comm(h->comm, sizeof(h->comm));
	struct task_struct *t = task;
	for (int i = 0; i < ANCESTORS; i++) {
		struct ancestor *a = &h->up[i];
		__builtin_memset(a, 0, sizeof(*a));
		if (!t)
			continue;
		t = BPF_CORE_READ(t, real_parent);
		a->pid = t ? BPF_CORE_READ(t, tgid) : 0;
		if (a->pid == 0) {
			t = NULL;
			continue;
		}
		a->uid = BPF_CORE_READ(t, cred, uid.val);
		BPF_CORE_READ_STR_INTO(&a->comm, t, comm);
	}
}

/* The struct file behind descriptor `fd` of the current task, or NULL. */
static __always_inline struct file *current_file(long fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct file **table = BPF_CORE_READ(task, files, fdt, fd);
	unsigned int max = BPF_CORE_READ(task, files, fdt, max_fds);
	struct file *f = NULL;
	if (fd < 0 || fd >= max)
		return NULL;
	bpf_probe_read_kernel(&f, sizeof(f), &table[fd]);
	return f;
}

#endif
