#!/bin/bash
# usage: trace.sh NAME cmd...   -> /tmp/tt/NAME.trace
T=/sys/kernel/tracing; name=$1; shift
echo 0 > $T/tracing_on; echo > $T/trace; echo mono > $T/trace_clock; echo 65536 > $T/buffer_size_kb
echo > $T/set_event
for e in sched:sched_switch sched:sched_wakeup tcp:tcp_probe tcp:tcp_rcvbuf_grow tcp:tcp_rcv_space_adjust sock:sock_exceed_buf_limit sock:sock_rcvqueue_full sock:sock_recv_length sock:sock_send_length tcp:tcp_cong_state_set tcp:tcp_retransmit_skb net:net_dev_xmit tcp:tcp_sendmsg_locked; do echo $e >> $T/set_event; done
echo 1 > $T/tracing_on
"$@"
echo 0 > $T/tracing_on
cat $T/trace > /tmp/tt/$name.trace
echo > $T/set_event
wc -l /tmp/tt/$name.trace; grep -c LOST /tmp/tt/$name.trace
