// SPDX-License-Identifier: Apache-2.0
/* Sensitive-files backend (issue 29): a successful open by a non-root uid that does not own
 * the file, of a file whose name or whose directory's name is in `names` (filled by userspace
 * from `[probes] sensitive_files`). The kernel side stays bounded by that name filter;
 * userspace matches the full path against the configured patterns. */
#include "common.h"

#define NAME_LEN 32
#define DEPTH 8

struct name_key {
	char name[NAME_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct name_key);
	__type(value, __u8);
} names SEC(".maps");

struct open_record {
	struct head head;
	__u32 owner;
	__u32 fd;
	__u32 depth;
	__u32 pad;
	/* The file's name first, then its parents' names up to DEPTH (or the mount's root). */
	char parts[DEPTH][NAME_LEN];
};

static __always_inline int watched(struct dentry *d, struct name_key *key)
{
	__builtin_memset(key, 0, sizeof(*key));
	bpf_probe_read_kernel_str(key->name, sizeof(key->name), BPF_CORE_READ(d, d_name.name));
	return bpf_map_lookup_elem(&names, key) != NULL;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	long nr = SYSCALL_NR(regs);
	if (ret < 0 || (nr != NR_OPENAT && nr != NR_OPEN && nr != NR_OPENAT2))
		return 0;
	__u32 uid = (__u32)bpf_get_current_uid_gid();
	if (uid == 0)
		return 0;
	struct file *f = current_file(ret);
	if (!f)
		return 0;
	__u32 owner = BPF_CORE_READ(f, f_inode, i_uid.val);
	if (owner == uid)
		return 0;
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	struct name_key key;
	if (!watched(d, &key) && !watched(parent, &key))
		return 0;
	struct open_record *r = bpf_ringbuf_reserve(&ring, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_head(&r->head);
	r->owner = owner;
	r->fd = (__u32)ret;
	r->pad = 0;
	__builtin_memset(r->parts, 0, sizeof(r->parts));
	__u32 depth = 0;
	for (int i = 0; i < DEPTH; i++) {
		bpf_probe_read_kernel_str(r->parts[i], NAME_LEN, BPF_CORE_READ(d, d_name.name));
		depth = i + 1;
		struct dentry *up = BPF_CORE_READ(d, d_parent);
		if (!up || up == d)
			break;
		d = up;
	}
	r->depth = depth;
	bpf_ringbuf_submit(r, 0);
	return 0;
}
