"""Hold every packet of an NFQUEUE queue for a fixed delay, then let it through.

The chaos harness's slow network (netns.py): `tc netem` needs the kernel's sch_netem, which
these machines lack, so each slowed namespace sends its outgoing packets to queue 0 and this
process, running inside that namespace, gives the verdicts. It speaks nfnetlink_queue directly
over a netlink socket (no library): bind the queue, copy packet metadata only, and accept packets
in arrival order once their delay has passed (one batch verdict accepts every packet up to an
id). With `--queue-bypass` on the rule, packets flow undelayed once this process exits.
"""

from __future__ import annotations

import argparse
import collections
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
MSG_PACKET, MSG_CONFIG, MSG_VERDICT_BATCH = 0, 2, 3
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
CFG_CMD, CFG_PARAMS, CFG_QUEUE_MAXLEN = 1, 2, 3
CMD_BIND = 1
COPY_META = 1
PACKET_HDR = 1
VERDICT_HDR = 2
NF_ACCEPT = 1


def attribute(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def message(kind: int, queue: int, attrs: list[bytes], flags: int = NLM_F_REQUEST) -> bytes:
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, queue) + b"".join(attrs)
    header = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, 0, 0)
    return header + body


def packet_ids(data: bytes) -> list[int]:
    """The packet ids of the queued-packet messages in one netlink read."""
    ids = []
    off = 0
    while off + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, off)
        if length < 16:
            break
        if kind == NLMSG_ERROR:
            (err,) = struct.unpack_from("=i", data, off + 16)
            if err:
                print(f"netlink error {err}", file=sys.stderr, flush=True)
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | MSG_PACKET:
            pos = off + 20  # netlink header + nfgenmsg
            while pos + 4 <= off + length:
                alen, akind = struct.unpack_from("=HH", data, pos)
                if alen < 4:
                    break
                if akind & 0x7FFF == PACKET_HDR:
                    ids.append(struct.unpack_from("!I", data, pos + 4)[0])
                pos += (alen + 3) & ~3
        off += (length + 3) & ~3
    return ids


def run(delay_s: float, queue: int) -> None:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((0, 0))
    acked = NLM_F_REQUEST | NLM_F_ACK
    sock.send(
        message(MSG_CONFIG, queue, [attribute(CFG_CMD, struct.pack("!BxH", CMD_BIND, 0))], acked)
    )
    params = [
        attribute(CFG_PARAMS, struct.pack("!IB", 0, COPY_META)),
        attribute(CFG_QUEUE_MAXLEN, struct.pack("!I", 65536)),
    ]
    sock.send(message(MSG_CONFIG, queue, params, acked))
    held: collections.deque[tuple[float, int]] = collections.deque()
    while True:
        timeout = max(0.0, held[0][0] - time.monotonic()) if held else None
        readable, _, _ = select.select([sock], [], [], timeout)
        if readable:
            due = time.monotonic() + delay_s
            held.extend((due, pid) for pid in packet_ids(sock.recv(1 << 20)))
        now = time.monotonic()
        last = None
        while held and held[0][0] <= now:
            last = held.popleft()[1]
        if last is not None:
            verdict = attribute(VERDICT_HDR, struct.pack("!II", NF_ACCEPT, last))
            sock.send(message(MSG_VERDICT_BATCH, queue, [verdict]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-ms", type=float, default=200.0)
    parser.add_argument("--queue", type=int, default=0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run(args.delay_ms / 1000, args.queue)


if __name__ == "__main__":
    main()
