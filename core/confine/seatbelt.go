package confine

import (
	"fmt"
	"strings"
)

// SeatbeltProfile returns the macOS Seatbelt profile (the Sandbox Profile
// Language of sandbox-exec -p) that confines a handler by p. It is pure:
// it builds on every system and does not look at the file system, so a
// path that does not exist is allowed all the same (and matches nothing).
//
// The profile denies everything by default and allows:
//   - reading (file-read*) the Read trees, the Write trees, the handler and
//     the macOS system set (SystemRules("darwin")); writing (file-write*)
//     the Write trees and /dev/null; metadata (stat) of any path, as
//     Landlock does on Linux;
//   - executing (process-exec, file-map-executable) the handler, the Read
//     and Write trees and the system libraries; fork;
//   - sysctl reads, which the Go runtime and libSystem make at start;
//   - mach-lookup of com.apple.trustd and com.apple.trustd.agent only:
//     crypto/x509 verifies certificates through Security.framework, which
//     asks trustd. Nothing else: no user lookups through opendirectoryd
//     (os/user reads /etc/passwd without cgo), no notification center, no
//     logd;
//   - AF_UNIX sockets (system-socket), for the socket pairs the SDK
//     passes to the core; no network at all, Unix sockets by path
//     included (network-outbound, network-inbound and network-bind stay
//     denied);
//   - signals to itself only.
//
// Paths under /tmp, /var and /etc are also allowed under /private, where
// those point on macOS: Seatbelt matches the resolved path. Every path is
// a string literal with backslashes and double quotes escaped.
func SeatbeltProfile(p Policy) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("(version 1)")
	line(";; carapace: the confinement of plugin %s", lit(p.Plugin))
	line("(deny default)")
	line("")
	line(";; processes: the handler and its forks; signals only to itself")
	line("(allow process-fork)")
	line("(allow signal (target self))")
	line("(allow sysctl-read)")
	line("")
	line(";; files: stat anywhere, as on Linux; the rules below for content")
	line("(allow file-read-metadata)")
	for _, r := range p.rules("darwin", func(string) bool { return true }) {
		for _, path := range aliases(r.Path) {
			line(";; %s", oneLine(r.Why))
			switch r.Access {
			case AccessRead:
				line("(allow file-read* (subpath %s))", lit(path))
			case AccessReadExec:
				line("(allow file-read* process-exec file-map-executable (subpath %s))", lit(path))
			case AccessReadWrite:
				line("(allow file-read* file-write-data (literal %s))", lit(path))
			case AccessAll:
				line("(allow file-read* file-write* process-exec file-map-executable (subpath %s))", lit(path))
			}
		}
	}
	line("")
	line(";; services: certificate verification (crypto/x509 asks trustd)")
	line("(allow mach-lookup (global-name \"com.apple.trustd\") (global-name \"com.apple.trustd.agent\"))")
	line("")
	line(";; sockets: AF_UNIX pairs for the SDK; no network, no Unix socket by path")
	line("(allow system-socket (socket-domain AF_UNIX))")
	line("(deny network-outbound)")
	line("(deny network-inbound)")
	line("(deny network-bind)")
	return b.String()
}

// aliases returns path and, for the folders macOS keeps under /private
// (/tmp, /var, /etc are symbolic links there), the resolved form too.
func aliases(path string) []string {
	for _, top := range []string{"/tmp", "/var", "/etc"} {
		if path == top || strings.HasPrefix(path, top+"/") {
			return []string{path, "/private" + path}
		}
	}
	return []string{path}
}

// lit is s as a Seatbelt string literal: in double quotes, with
// backslashes and double quotes escaped and control characters (which
// Validate refuses in paths) replaced, so no value ends the literal.
func lit(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case isControl(r):
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// oneLine keeps a comment on its line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)
}
