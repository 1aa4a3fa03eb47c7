#!/usr/bin/python3
"""bench/guard_layouts.py: nft text for three layouts of the guard's table, for
bench/guard_layouts.sh, which measures what one session's install and removal
cost the kernel beside N others (docs/performance.md, "A session as data").

  guard_layouts.py CGROOT LAYOUT base            the table without sessions
  guard_layouts.py CGROOT LAYOUT sess K          session K's install
  guard_layouts.py CGROOT LAYOUT many N          sessions 0..N-1, one transaction
  guard_layouts.py CGROOT LAYOUT del K           session K's removal

CGROOT: a cgroup below the cgroup2 root holding b/s0, b/s1, ... (the sessions'
cgroups: nft resolves them by path). Layouts:
  C  today's: chains s-<id> and lo-<id> per session, reached through verdict maps
     (the text `nft list` printed for a default session of lyhd on 2026-12-07)
  H  shared rules (chain guarded) decide from elements keyed by the session's cgroup;
     the rest of the table is C's; each session
     keeps two one-rule chains, a-<id> and d-<id>, that log its new and its
     refused flows under its own prefix (reached through verdict maps)
  D  shared rules and elements only: the logging through named limits and counters
     chosen by cgroup, under one prefix for all sessions
  P  H plus one element per session in a concatenated interval set (a LAN exception)
A prototype for measuring, not lyh's renderer: H and D are not complete guards.
"""
import sys

C_BASE = """table inet lyhgl {
	set lan4 {
		type ipv4_addr
		flags interval
		elements = { 0.0.0.0/8, 10.0.0.0/8,
			     100.64.0.0/10, 127.0.0.0/8,
			     169.254.0.0/16, 172.16.0.0/12,
			     192.0.0.0/24, 192.0.2.0/24,
			     192.88.99.0/24, 192.168.0.0/16,
			     198.18.0.0/15, 198.51.100.0/24,
			     203.0.113.0/24, 224.0.0.0/4,
			     240.0.0.0/4 }
	}

	set lan6 {
		type ipv6_addr
		flags interval
		elements = { ::,
			     ::1,
			     ::ffff:0.0.0.0/96,
			     64:ff9b:1::/48,
			     100::/64,
			     2001:db8::/32,
			     fc00::/7,
			     fe80::/10,
			     ff00::/8 }
	}

	map sessions {
		type cgroupsv2 : verdict
	}

	set proto4 {
		type ipv4_addr
	}

	set proto6 {
		type ipv6_addr
	}

	map loopback {
		type mark : verdict
	}

	map served {
		type cgroupsv2 : mark
	}

	map dnsport {
		type cgroupsv2 : inet_service
	}

	chain output {
		type filter hook output priority filter; policy accept;
		meta skuid 65533 oifname "lo" meta l4proto tcp ct direction reply accept
		meta skuid 65533 ip daddr @proto4 udp dport 53 accept
		meta skuid 65533 ip6 daddr @proto6 udp dport 53 accept
		meta skuid 65533 counter drop
		meta skgid 2000000-2065535 ct direction reply oifname != "lo" counter drop
		meta skgid 2000000-2065535 ct direction reply oifname "lo" ip daddr 127.0.0.0/8 tcp flags syn,ack / syn,ack counter accept
		meta skgid 2000000-2065535 ct direction reply oifname "lo" ip6 daddr ::1 tcp flags syn,ack / syn,ack counter accept
		meta skgid != 2000000-2065535 ct direction original ct mark 0x80000000 counter drop
		meta skgid != 2000000-2065535 ct direction reply ct mark 0x80000000 meta mark != 0x4c594844 counter drop
		oifname "lo" meta skgid != 2000000-2065535 ct direction original ct mark 0x80000000/2 ct mark set 0x00000000
		meta skgid 2000000-2065535 jump guarded
	}

	chain guarded {
		socket cgroupv2 level 3 vmap @sessions
		limit rate 2000/second burst 1000 packets log prefix "lyh:nosession:D " group 7
		meta l4proto tcp counter reject with tcp reset
		counter reject with icmpx admin-prohibited
	}

	chain input {
		type filter hook input priority filter - 10; policy accept;
		ct direction original ip daddr 127.0.0.0/8 ct mark 0x80000000 socket mark != 0x4c594844 counter drop
		ct direction original ip daddr 127.0.0.0/8 ct mark != 0x80000000 socket mark 0x4c594844 counter drop
		ct direction original ip6 daddr ::1 ct mark 0x80000000 socket mark != 0x4c594844 counter drop
		ct direction original ip6 daddr ::1 ct mark != 0x80000000 socket mark 0x4c594844 counter drop
		iifname != "lo" socket cgroupv2 level 2 {CGB} ct state invalid,untracked counter drop comment "sessions cgroup"
		iifname != "lo" socket cgroupv2 level 2 {CGB} ct direction original meta l4proto tcp counter reject with tcp reset comment "sessions cgroup"
		iifname != "lo" socket cgroupv2 level 2 {CGB} ct direction original counter reject with icmpx admin-prohibited comment "sessions cgroup"
		iifname "lo" ct mark vmap @loopback comment "sessions cgroup"
		iifname "lo" ct direction original ct state new ct mark 0x00000000 ct mark set socket cgroupv2 level 3 map @served comment "sessions cgroup"
	}

	chain dnsnat {
		type nat hook output priority -100; policy accept;
		meta skgid 2000000-2065535 meta nfproto ipv4 udp dport 53 dnat ip to 127.0.0.1:socket cgroupv2 level 3 map @dnsport
		meta skgid 2000000-2065535 meta nfproto ipv4 tcp dport 53 dnat ip to 127.0.0.1:socket cgroupv2 level 3 map @dnsport
		meta skgid 2000000-2065535 meta nfproto ipv6 udp dport 53 dnat ip6 to [::1]:socket cgroupv2 level 3 map @dnsport
		meta skgid 2000000-2065535 meta nfproto ipv6 tcp dport 53 dnat ip6 to [::1]:socket cgroupv2 level 3 map @dnsport
	}

	chain dnsout {
		type filter hook postrouting priority filter; policy accept;
		meta skgid 2000000-2065535 ct status dnat oifname != "lo" counter drop
	}

}
"""

C_SESS = """	chain s-{SID} {
		oifname "tun0" ct state established,related ip daddr != @lan4 tcp dport != 53 counter accept
		oifname "tun0" ct state established,related ip daddr != @lan4 udp dport != 53 counter accept
		oifname "tun0" ct state established,related ip6 daddr != @lan6 tcp dport != 53 counter accept
		oifname "tun0" ct state established,related ip6 daddr != @lan6 udp dport != 53 counter accept
		ct status dnat ip daddr 127.0.0.1 udp dport {DNSPORT} ct mark set 0x80000000 counter accept
		ct status dnat ip daddr 127.0.0.1 tcp dport {DNSPORT} ct mark set 0x80000000 counter accept
		ct status dnat ip6 daddr ::1 udp dport {DNSPORT} ct mark set 0x80000000 counter accept
		ct status dnat ip6 daddr ::1 tcp dport {DNSPORT} ct mark set 0x80000000 counter accept
		udp dport 53 limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:D " group 7
		udp dport 53 counter reject with icmpx admin-prohibited
		tcp dport 53 limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:D " group 7
		tcp dport 53 counter reject with tcp reset
		oifname "lo" ct state invalid,untracked counter drop
		oifname "lo" ip daddr 127.0.0.0/8 ct state new ct mark set {MARK} counter limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:A " group 7
		oifname "lo" ip daddr 127.0.0.0/8 ct mark {MARK} counter accept
		oifname "lo" ip daddr 127.0.0.0/8 ct direction reply ct mark {SERVED} counter accept
		oifname "lo" ip6 daddr ::1 ct state new ct mark set {MARK} counter limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:A " group 7
		oifname "lo" ip6 daddr ::1 ct mark {MARK} counter accept
		oifname "lo" ip6 daddr ::1 ct direction reply ct mark {SERVED} counter accept
		oifname "lo" limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:D " group 7
		oifname "lo" meta l4proto tcp counter reject with tcp reset
		oifname "lo" counter reject with icmpx admin-prohibited
		ip daddr @lan4 limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:D " group 7
		ip daddr @lan4 meta l4proto tcp counter reject with tcp reset
		ip daddr @lan4 counter reject with icmpx admin-prohibited
		ip6 daddr @lan6 limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:D " group 7
		ip6 daddr @lan6 meta l4proto tcp counter reject with tcp reset
		ip6 daddr @lan6 counter reject with icmpx admin-prohibited
		oifname "tun0" ct state new counter limit rate 126474/second burst 63237 packets log prefix "lyh:{SID}:A " group 7
		oifname "tun0" counter accept
		limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:D " group 7
		meta l4proto tcp counter reject with tcp reset
		counter reject with icmpx admin-prohibited
	}

	chain lo-{SID} {
		meta l4proto icmp accept
		meta l4proto ipv6-icmp accept
		meta l4proto tcp ct state ! new accept
		socket cgroupv2 level 3 {CG} counter accept
		socket cgroupv2 level 2 {CGB} limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:D " group 7
		socket cgroupv2 level 2 {CGB} meta l4proto tcp counter reject with tcp reset
		socket cgroupv2 level 2 {CGB} counter reject with icmpx admin-prohibited
		limit rate 2000/second burst 1000 packets log prefix "lyh:{SID}:D " group 7
		meta l4proto tcp counter reject with tcp reset
		counter reject with icmpx admin-prohibited
	}
"""

L3 = 'socket cgroupv2 level 3'

HD_SETS = """
	set live { type cgroupsv2; }
	set vpn { type cgroupsv2 . ifname; }
	set dnsfwd { type inet_service . cgroupsv2; }
	map lomark { type cgroupsv2 : mark; }
	set loown { type mark . cgroupsv2; }
	set exc4 { type cgroupsv2 . ipv4_addr . inet_proto . inet_service; flags interval; }
	set v6off { type cgroupsv2; }
"""

HD_GUARDED = """
 chain guarded {
   ct state established,related L3 . oifname @vpn ip daddr != @lan4 tcp dport != 53 ACCT accept
   ct state established,related L3 . oifname @vpn ip daddr != @lan4 udp dport != 53 ACCT accept
   ct state established,related L3 . oifname @vpn ip6 daddr != @lan6 tcp dport != 53 ACCT accept
   ct state established,related L3 . oifname @vpn ip6 daddr != @lan6 udp dport != 53 ACCT accept
   L3 != @live goto nosession
   ct status dnat ip daddr 127.0.0.1 th dport . L3 @dnsfwd ct mark set 0x80000000 ACCT accept
   th dport 53 goto refuse
   oifname "lo" ct state invalid,untracked drop
   oifname "lo" ip daddr 127.0.0.0/8 ct state new ct mark set L3 map @lomark
   oifname "lo" ct mark . L3 @loown ACCT accept
   oifname "lo" goto refuse
   L3 . ip daddr . meta l4proto . th dport @exc4 ACCT accept
   ip daddr @lan4 goto refuse
   ip6 daddr @lan6 goto refuse
   meta nfproto ipv6 L3 @v6off goto refuse
   ACCEPT
   goto refuse
 }
 chain nosession {
   limit rate 2000/second burst 1000 packets log prefix "lyh:nosession:D " group 7
   meta l4proto tcp reject with tcp reset
   reject with icmpx admin-prohibited
 }
 chain refuse {
   REFUSELOG
   meta l4proto tcp reject with tcp reset
   reject with icmpx admin-prohibited
 }
"""


def sid(k):
    return 'p%016d' % k


def mark(k):
    return 0x80000000 | (k + 1)


def c_base(cg):
    return C_BASE.replace('{CGB}', '"%s/b"' % cg)


def c_sess(cg, k):
    body = (C_SESS.replace('{SID}', sid(k)).replace('{CG}', '"%s/b/s%d"' % (cg, k))
            .replace('{CGB}', '"%s/b"' % cg).replace('{MARK}', '0x%08x' % mark(k))
            .replace('{SERVED}', '0x%08x' % (0xc0000000 | (k + 1)))
            .replace('{DNSPORT}', str(20000 + k)))
    c = '"%s/b/s%d"' % (cg, k)
    return ('table inet lyhgl {\n' + body + '}\n'
            'add element inet lyhgl sessions { %s : jump s-%s }\n' % (c, sid(k)) +
            'add element inet lyhgl loopback { 0x%08x : jump lo-%s }\n' % (mark(k), sid(k)) +
            'add element inet lyhgl served { %s : 0x%08x }\n' % (c, 0xc0000000 | (k + 1)) +
            'add element inet lyhgl dnsport { %s : %d }\n' % (c, 20000 + k))


def c_del(cg, k):
    c = '"%s/b/s%d"' % (cg, k)
    return ('delete element inet lyhgl sessions { %s }\n' % c +
            'delete element inet lyhgl loopback { 0x%08x }\n' % mark(k) +
            'delete element inet lyhgl served { %s }\n' % c +
            'delete element inet lyhgl dnsport { %s }\n' % c +
            'delete chain inet lyhgl s-%s\ndelete chain inet lyhgl lo-%s\n' % (sid(k), sid(k)))


def hd_base(cg, lay):
    """C's table (its output, input and DNS chains and their sets kept, so that a
    packet meets the same rules outside chain guarded) with H's or D's chain
    guarded and sets in place of C's."""
    sets = HD_SETS + '\tmap acct { type cgroupsv2 : counter; }\n'
    if lay in 'HP':
        sets += '\tmap alog { type cgroupsv2 : verdict; }\n\tmap dlog { type cgroupsv2 : verdict; }\n'
        acc = 'ct state new L3 . oifname @vpn L3 vmap @alog\n   L3 . oifname @vpn ACCT accept'
        rlog = 'L3 vmap @dlog'
    else:
        sets += ('\tmap alim { type cgroupsv2 : limit; }\n\tmap dlim { type cgroupsv2 : limit; }\n'
                 '\tmap acnt { type cgroupsv2 : counter; }\n\tmap dcnt { type cgroupsv2 : counter; }\n')
        acc = ('ct state new L3 . oifname @vpn counter name L3 map @acnt\n'
               '   ct state new L3 . oifname @vpn limit name L3 map @alim log prefix "lyh:A " group 7\n'
               '   L3 . oifname @vpn ACCT accept')
        rlog = 'counter name L3 map @dcnt\n   limit name L3 map @dlim log prefix "lyh:D " group 7'
    guarded = (HD_GUARDED.replace('ACCEPT', acc).replace('REFUSELOG', rlog)
               .replace('ACCT', 'counter name L3 map @acct').replace('L3', L3))
    base = c_base(cg)
    start = base.index('\tchain guarded {')
    end = base.index('\t}\n', start) + 3
    base = base[:start] + guarded + base[end:]
    return base.replace('table inet lyhgl {', 'table inet lyhgl {' + sets, 1)


def hd_elems(cg, lay, k, verb):
    c = '"%s/b/s%d"' % (cg, k)
    keys = [('live', c), ('vpn', c + ' . "tun0"'), ('dnsfwd', '%d . %s' % (20000 + k, c)),
            ('loown', '0x%08x . %s' % (mark(k), c))]
    vals = [('dnsport', str(20000 + k)), ('lomark', '0x%08x' % mark(k)), ('acct', '"t-%s"' % sid(k)),
            ('served', '0x%08x' % (0xc0000000 | (k + 1)))]
    if lay == 'P':
        keys.append(('exc4', c + ' . 10.1.2.0/24 . tcp . 8080-8081'))
    if lay in 'HP':
        vals += [('alog', 'jump a-' + sid(k)), ('dlog', 'jump d-' + sid(k))]
    else:
        vals += [('alim', '"a-%s"' % sid(k)), ('dlim', '"d-%s"' % sid(k)),
                 ('acnt', '"ca-%s"' % sid(k)), ('dcnt', '"cd-%s"' % sid(k))]
    out = ['%s element inet lyhgl %s { %s }\n' % (verb, s, e) for s, e in keys]
    if verb == 'add':
        out += ['add element inet lyhgl %s { %s : %s }\n' % (s, c, v) for s, v in vals]
    else:
        out += ['delete element inet lyhgl %s { %s }\n' % (s, c) for s, v in vals]
    return out


def hd_sess(cg, lay, k):
    s = sid(k)
    if lay in 'HP':
        objs = ('add chain inet lyhgl a-%s\n'
                'add rule inet lyhgl a-%s counter limit rate 120000/second burst 60000 packets log prefix "lyh:%s:A " group 7\n'
                'add chain inet lyhgl d-%s\n'
                'add rule inet lyhgl d-%s counter limit rate 2000/second burst 1000 packets log prefix "lyh:%s:D " group 7\n'
                % (s, s, s, s, s, s))
    else:
        objs = ('add limit inet lyhgl a-%s { rate 120000/second burst 60000 packets }\n'
                'add limit inet lyhgl d-%s { rate 2000/second burst 1000 packets }\n'
                'add counter inet lyhgl ca-%s\nadd counter inet lyhgl cd-%s\n' % (s, s, s, s))
    objs += 'add counter inet lyhgl t-%s\n' % s  # its accepted traffic (the end record's totals)
    return objs + ''.join(hd_elems(cg, lay, k, 'add'))


def hd_del(cg, lay, k):
    s = sid(k)
    out = ''.join(hd_elems(cg, lay, k, 'delete')) + 'delete counter inet lyhgl t-%s\n' % s
    if lay in 'HP':
        return out + 'delete chain inet lyhgl a-%s\ndelete chain inet lyhgl d-%s\n' % (s, s)
    return out + ('delete limit inet lyhgl a-%s\ndelete limit inet lyhgl d-%s\n'
                  'delete counter inet lyhgl ca-%s\ndelete counter inet lyhgl cd-%s\n' % (s, s, s, s))


def main(argv):
    if len(argv) not in (4, 5) or argv[2] not in ('C', 'H', 'D', 'P'):
        sys.stderr.write(__doc__)
        return 2
    cg, lay, what = argv[1], argv[2], argv[3]
    k = int(argv[4]) if len(argv) == 5 else 0
    if what == 'base':
        out = c_base(cg) if lay == 'C' else hd_base(cg, lay)
    elif what == 'sess':
        out = c_sess(cg, k) if lay == 'C' else hd_sess(cg, lay, k)
    elif what == 'many':
        out = ''.join(c_sess(cg, i) if lay == 'C' else hd_sess(cg, lay, i) for i in range(k))
    elif what == 'del':
        out = c_del(cg, k) if lay == 'C' else hd_del(cg, lay, k)
    else:
        sys.stderr.write(__doc__)
        return 2
    sys.stdout.write(out)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
