#!/usr/bin/env python3
"""Decodes a pcap of RocketMQ remoting traffic into the `.txt` listing kept beside each capture
in tests/vectors: every frame in capture order, its direction, code, header and body.

This decoder shares no code with Petrel's (it is Python, with its own pcap reader, TCP
reassembly and frame parser), so the listings are a second opinion on the bytes; the golden
tests compare Petrel's decoding with them. `--check DIR` regenerates every listing of DIR in
memory and fails unless each matches the file beside its pcap byte for byte.

Usage: decode.py CAPTURE.pcap > CAPTURE.txt | decode.py --check tests/vectors
"""

import json
import os
import re
import struct
import sys

PORT_ROLES = {9876: "namesrv", 10911: "broker", 10909: "broker"}
JSON_TEXT_LIMIT = 1024
CODES_RS = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "protocol", "src", "codes.rs")
LANGUAGES = ["JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST"]


def code_names():
    """Request and response code names, read from the protocol crate's table (names only)."""
    text = open(CODES_RS, encoding="utf-8").read()
    tables = {}
    for kind, start in (("request", r"request_code, request_code_name(, \"\w+\")? \{"), ("response", r"response_code, response_code_name(, \"\w+\")? \{")):
        block = text[re.search(start, text).start():]
        block = block[: block.index("}")]
        tables[kind] = {int(n): name for name, n in re.findall(r"([A-Z0-9_]+)\s*=\s*(-?\d+)", block)}
    return tables["request"], tables["response"]


def read_packets(data):
    """(time_us, src_port, dst_port, payload, syn, fin_or_rst) for each TCP packet."""
    magic, _, _, _, _, _, linktype = struct.unpack("<IHHiIII", data[:24])
    assert magic == 0xA1B2C3D4 and linktype == 1, "a microsecond pcap of Ethernet frames"
    at, out = 24, []
    while at + 16 <= len(data):
        sec, usec, incl, _ = struct.unpack("<IIII", data[at:at + 16])
        pkt = data[at + 16:at + 16 + incl]
        at += 16 + incl
        ethertype = struct.unpack(">H", pkt[12:14])[0]
        if ethertype == 0x0800:
            ip = pkt[14:]
            if ip[9] != 6:
                continue
            tcp = ip[(ip[0] & 0x0F) * 4:struct.unpack(">H", ip[2:4])[0]]
        elif ethertype == 0x86DD:
            ip = pkt[14:]
            if ip[6] != 6:
                continue
            tcp = ip[40:40 + struct.unpack(">H", ip[4:6])[0]]
        else:
            continue
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        flags = tcp[13]
        payload = tcp[(tcp[12] >> 4) * 4:]
        out.append((sec * 1_000_000 + usec, sport, dport, seq, payload, bool(flags & 0x02), bool(flags & 0x05)))
    return out


class Stream:
    def __init__(self, index):
        self.index = index
        self.next_seq = {}
        self.buffers = {}
        self.closed = False


def reassemble(packets):
    """Splits each direction of each connection into frames: (packet index, time, stream,
    src port, dst port, frame bytes), in the order their last byte arrived."""
    streams, live, frames = [], {}, []
    for i, (t, sp, dp, seq, payload, syn, fin) in enumerate(packets):
        key = tuple(sorted((sp, dp)))
        s = live.get(key)
        if s is None or (syn and s.closed):
            s = Stream(len(streams))
            streams.append(s)
            live[key] = s
        if fin:
            s.closed = True
        if not payload:
            continue
        d = (sp, dp)
        expected = s.next_seq.get(d)
        if expected is not None and seq != expected:
            if (seq - expected) % (1 << 32) > (1 << 31):
                continue  # a retransmission of bytes already taken
            raise ValueError(f"gap in stream {s.index}")
        s.next_seq[d] = (seq + len(payload)) % (1 << 32)
        buf = s.buffers.setdefault(d, [b"", None])
        if not buf[0]:
            buf[1] = t
        buf[0] += payload
        while len(buf[0]) >= 4:
            total = struct.unpack(">i", buf[0][:4])[0] + 4
            if len(buf[0]) < total:
                break
            frames.append((i, buf[1], s.index, sp, dp, buf[0][:total]))
            buf[0] = buf[0][total:]
            buf[1] = t
    return frames


def parse_frame(frame):
    """(header dict, serialize type name, header length, body)."""
    word = struct.unpack(">I", frame[4:8])[0]
    st, hlen = word >> 24, word & 0xFFFFFF
    raw, body = frame[8:8 + hlen], frame[8 + hlen:]
    if st == 0:
        return json.loads(raw.decode("utf-8")), "JSON", hlen, body
    code, lang, version, opaque, flag = struct.unpack(">hBhii", raw[:13])
    at = 13
    rlen = struct.unpack(">i", raw[at:at + 4])[0]
    at += 4
    remark = raw[at:at + rlen].decode("utf-8") if rlen > 0 else None
    at += max(rlen, 0)
    elen = struct.unpack(">i", raw[at:at + 4])[0]
    at += 4
    ext, end = {}, at + elen
    while at < end:
        klen = struct.unpack(">h", raw[at:at + 2])[0]
        k = raw[at + 2:at + 2 + klen].decode("utf-8")
        at += 2 + klen
        vlen = struct.unpack(">i", raw[at:at + 4])[0]
        v = raw[at + 4:at + 4 + vlen].decode("utf-8")
        at += 4 + vlen
        ext[k] = v
    header = {
        "code": code,
        "language": LANGUAGES[lang],
        "version": version,
        "opaque": opaque,
        "flag": flag,
        "remark": remark,
        "extFields": ext,
    }
    return header, "ROCKETMQ", hlen, body


def stored_messages(body):
    """Decodes a pull answer's body into lines, or None if it is not a run of stored records."""
    lines, at = [], 0
    while at < len(body):
        if len(body) - at < 8:
            return None
        size, magic = struct.unpack(">ii", body[at:at + 8])
        if size <= 0 or at + size > len(body):
            return None
        version = {-626843481: "V1", -626843477: "V2"}.get(magic)
        if version is None:
            return None
        rec = body[at:at + size]
        p = 8
        crc, qid, flag, qoff, coff, sysflag, born = struct.unpack(">iiiqqiq", rec[p:p + 40])
        p += 40
        born_v6 = sysflag & (1 << 4)
        blen = 16 if born_v6 else 4
        born_host = ".".join(str(b) for b in rec[p:p + 4]) if not born_v6 else rec[p:p + 16].hex()
        born_port = struct.unpack(">i", rec[p + blen:p + blen + 4])[0]
        p += blen + 4
        store_ts = struct.unpack(">q", rec[p:p + 8])[0]
        p += 8
        store_v6 = sysflag & (1 << 5)
        slen = 16 if store_v6 else 4
        store_host = ".".join(str(b) for b in rec[p:p + 4]) if not store_v6 else rec[p:p + 16].hex()
        store_port = struct.unpack(">i", rec[p + slen:p + slen + 4])[0]
        p += slen + 4
        reconsume, prepared = struct.unpack(">iq", rec[p:p + 12])
        p += 12
        bodylen = struct.unpack(">i", rec[p:p + 4])[0]
        msg_body = rec[p + 4:p + 4 + bodylen]
        p += 4 + bodylen
        if version == "V2":
            tlen = struct.unpack(">h", rec[p:p + 2])[0]
            p += 2
        else:
            tlen = rec[p]
            p += 1
        topic = rec[p:p + tlen].decode("utf-8")
        p += tlen
        plen = struct.unpack(">h", rec[p:p + 2])[0]
        props_raw = rec[p + 2:p + 2 + plen].decode("utf-8")
        props = {}
        for pair in props_raw.split("\x02"):
            if "\x01" in pair:
                k, v = pair.split("\x01", 1)
                props[k] = v
        lines.append(
            f"  body: stored message ({version}, {size} bytes): topic={topic} queueId={qid} queueOffset={qoff} "
            f"commitLogOffset={coff} sysFlag={sysflag} flag={flag} bodyCRC={crc} bornTimestamp={born} "
            f"bornHost={born_host}:{born_port} storeTimestamp={store_ts} storeHost={store_host}:{store_port} "
            f"reconsumeTimes={reconsume} preparedTransactionOffset={prepared} body={msg_body!r} properties={props!r}"
        )
        at += size
    return lines


def body_lines(body, is_pull_answer):
    if not body:
        return []
    if is_pull_answer:
        stored = stored_messages(body)
        if stored is not None:
            return stored
    if body[:1] in (b"{", b"["):
        text = body.decode("utf-8", "replace")
        cut = len(text) > JSON_TEXT_LIMIT
        return [f"  body (JSON-like text): {text[:JSON_TEXT_LIMIT]}{' ...' if cut else ''}"]
    return [f"  body hex {body.hex()}", f"      text {body.decode('utf-8', 'replace')!r}"]


def decode(path):
    requests, responses = code_names()
    frames = reassemble(read_packets(open(path, "rb").read()))
    name = os.path.basename(path)
    parsed = [(f, parse_frame(f[5])) for f in frames]
    brokers_as_clients = {
        (f[2], f[3]) for f, (h, *_) in parsed if not h["flag"] & 1 and h["code"] == 103 and f[4] == 9876
    }
    start = read_packets(open(path, "rb").read())[0][0]
    asked = {}
    out = [
        f"# {name}: RocketMQ remoting frames, in capture order (t = seconds since capture start)",
        "# 'broker(as client)' = the broker's own connection to the name server (registration etc.)",
        "",
    ]

    def side(stream, port, peer):
        if port in PORT_ROLES:
            return PORT_ROLES[port]
        return f"broker(as client):{port}" if (stream, port) in brokers_as_clients else f"client:{port}"

    for (_, t, stream, sp, dp, frame), (header, st, hlen, body) in parsed:
        is_response = bool(header["flag"] & 1)
        code = header["code"]
        where = f"[t={(t - start) / 1e6:.6f} stream {stream}] {side(stream, sp, dp)} -> {side(stream, dp, sp)}"
        if is_response:
            req = asked.get((stream, dp, header["opaque"]))
            what = f"RESPONSE {code} {responses.get(code, '?')} to {requests.get(req, '?')}"
        else:
            asked[(stream, sp, header["opaque"])] = code
            oneway = " (oneway)" if header["flag"] & 2 else ""
            what = f"REQUEST {code} {requests.get(code, '?')}{oneway}"
        out.append(f"{where}: {what}")
        out.append(f"  frame {len(frame)} bytes, serializeType={st}, header {hlen} bytes, body {len(body)} bytes")
        out.append(f"  header {json.dumps(header, sort_keys=True)}")
        pull_answer = is_response and code == 0 and asked.get((stream, dp, header["opaque"])) in (11, 361)
        out.extend(body_lines(body, pull_answer))
        out.append("")
    out.append(f"# {len(parsed)} frames decoded")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        folder, bad = sys.argv[2], 0
        for f in sorted(os.listdir(folder)):
            if not f.endswith(".pcap"):
                continue
            want = open(os.path.join(folder, f[:-5] + ".txt"), encoding="utf-8").read()
            got = decode(os.path.join(folder, f))
            if got != want:
                bad += 1
                print(f"{f}: the listing differs from {f[:-5]}.txt")
            else:
                print(f"{f}: listing reproduced")
        sys.exit(1 if bad else 0)
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(decode(sys.argv[1]))


if __name__ == "__main__":
    main()
