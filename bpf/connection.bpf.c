// SPDX-License-Identifier: Apache-2.0
/* Connection backend (issue 29): outbound TCP connects (the socket leaves CLOSE for SYN_SENT,
 * in the connecting process) and inbound TCP accepts (accept/accept4 returning a descriptor). */
#include "common.h"

#define TCP_SYN_SENT 2
#define TCP_CLOSE 7
#define DIR_OUT 1
#define DIR_IN 2

struct conn_record {
	struct head head;
	__u16 family;
	__u16 direction;
	/* Host order. */
	__u16 local_port;
	__u16 remote_port;
	/* IPv4 in the first 4 bytes; network order. */
	__u8 local_addr[16];
	__u8 remote_addr[16];
};

static __always_inline int emit(const struct sock *sk, __u16 direction)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != AF_INET && family != AF_INET6)
		return 0;
	struct conn_record *r = bpf_ringbuf_reserve(&ring, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_head(&r->head);
	r->family = family;
	r->direction = direction;
	r->local_port = BPF_CORE_READ(sk, __sk_common.skc_num);
	r->remote_port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	__builtin_memset(r->local_addr, 0, sizeof(r->local_addr));
	__builtin_memset(r->remote_addr, 0, sizeof(r->remote_addr));
	/* BPF_CORE_READ_INTO copies sizeof(*dst): typed pointers, not the byte arrays. */
	if (family == AF_INET) {
		__u32 *local = (__u32 *)r->local_addr, *remote = (__u32 *)r->remote_addr;
		BPF_CORE_READ_INTO(local, sk, __sk_common.skc_rcv_saddr);
		BPF_CORE_READ_INTO(remote, sk, __sk_common.skc_daddr);
	} else {
		struct in6_addr *local = (struct in6_addr *)r->local_addr;
		struct in6_addr *remote = (struct in6_addr *)r->remote_addr;
		BPF_CORE_READ_INTO(local, sk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(remote, sk, __sk_common.skc_v6_daddr);
	}
	bpf_ringbuf_submit(r, 0);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(on_state, const struct sock *sk, int oldstate, int newstate)
{
	if (oldstate != TCP_CLOSE || newstate != TCP_SYN_SENT)
		return 0;
	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	return emit(sk, DIR_OUT);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	long nr = SYSCALL_NR(regs);
	if (ret < 0 || (nr != NR_ACCEPT && nr != NR_ACCEPT4))
		return 0;
	struct file *f = current_file(ret);
	if (!f)
		return 0;
	struct socket *sock = BPF_CORE_READ(f, private_data);
	struct sock *sk = BPF_CORE_READ(sock, sk);
	if (!sk || BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	return emit(sk, DIR_IN);
}
