package wire

import (
	"encoding/binary"
)

// ZMTP 3.x wire constants (https://rfc.zeromq.org/spec/23/).
const (
	GreetingLen = 64 // bytes in a ZMTP 3.x greeting

	sigHeader = 0xFF // greeting byte 0
	sigFooter = 0x7F // greeting byte 9

	// Frame header flags.
	FlagMore    = 0x01
	FlagLong    = 0x02
	FlagCommand = 0x04
	FlagsKnown  = FlagMore | FlagLong | FlagCommand

	cmdReady       = "READY"
	propSocketType = "Socket-Type"
	mechanismNull  = "NULL"
)

// Greeting is the greeting this side sends. It is byte for byte the
// greeting zmq4 v0.17.0 writes for the NULL mechanism (signature with zero
// padding, version 3.0, "NULL", as-server 0, zero filler): the listener sends
// it before zmq4 takes the connection over and then swallows zmq4's own copy,
// and the Dealer sends it as its own.
var Greeting = func() (g [GreetingLen]byte) {
	g[0] = sigHeader
	g[9] = sigFooter
	g[10] = 3
	g[11] = 0
	copy(g[12:32], mechanismNull)
	return g
}()

// socketTypes are the ZMTP socket types zmq4 knows, in canonical spelling.
var socketTypes = []string{
	"PAIR", "PUB", "SUB", "REQ", "REP", "DEALER", "ROUTER",
	"PULL", "PUSH", "XPUB", "XSUB",
}

// CheckGreeting validates a peer's 64-byte ZMTP greeting. The 8 padding bytes
// of the signature and the 31 filler bytes are not checked: libzmq puts a
// ZMTP 1.0 length in the padding, and nothing reads the filler.
func CheckGreeting(g *[GreetingLen]byte) error {
	switch {
	case g[0] != sigHeader || g[9] != sigFooter:
		return withDetail(ErrBadGreeting, "signature")
	case g[10] != 3:
		return withDetail(ErrBadGreeting, "version is not 3.x")
	case string(g[12:12+len(mechanismNull)]) != mechanismNull || !allZero(g[12+len(mechanismNull):32]):
		return withDetail(ErrBadGreeting, "mechanism is not NULL")
	case g[32] > 1:
		return withDetail(ErrBadGreeting, "as-server flag")
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ParseReady validates the body of a READY command frame (command name and
// metadata) and returns the peer's socket type in canonical spelling. Every
// length is checked against what remains before it is used; any property
// other than Socket-Type — Identity in particular — is parsed and dropped.
func ParseReady(body []byte) (socketType string, err error) {
	if len(body) == 0 {
		return "", withDetail(ErrBadReady, "empty command")
	}
	n := int(body[0])
	if n > len(body)-1 {
		return "", withDetail(ErrBadReady, "command name past end")
	}
	if string(body[1:1+n]) != cmdReady {
		return "", withDetail(ErrBadReady, "not a READY command")
	}
	md := body[1+n:]
	var names []string // lower-cased, for the duplicate check; at most ~680 fit in 4 KiB
	for i := 0; i < len(md); {
		klen := int(md[i])
		i++
		if klen == 0 {
			return "", withDetail(ErrBadReady, "empty property name")
		}
		if klen > len(md)-i {
			return "", withDetail(ErrBadReady, "property name past end")
		}
		name := md[i : i+klen]
		i += klen
		if !validName(name) {
			return "", withDetail(ErrBadReady, "bad property name")
		}
		if len(md)-i < 4 {
			return "", withDetail(ErrBadReady, "truncated value length")
		}
		vlen := uint64(binary.BigEndian.Uint32(md[i : i+4]))
		i += 4
		if vlen > uint64(len(md)-i) {
			return "", withDetail(ErrBadReady, "value past end")
		}
		value := md[i : i+int(vlen)]
		i += int(vlen)

		lower := asciiLower(name)
		for _, seen := range names {
			if seen == lower {
				return "", withDetail(ErrBadReady, "duplicate property")
			}
		}
		names = append(names, lower)

		if lower == "socket-type" {
			socketType = canonicalType(value)
			if socketType == "" {
				return "", withDetail(ErrBadReady, "unknown socket type")
			}
		}
	}
	if socketType == "" {
		return "", withDetail(ErrBadReady, "missing Socket-Type")
	}
	return socketType, nil
}

// validName reports whether a metadata property name uses only the ZMTP 3.0
// name-char set: ALPHA / DIGIT / "-" / "_" / "." / "+".
func validName(b []byte) bool {
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '+':
		default:
			return false
		}
	}
	return true
}

func asciiLower(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// canonicalType returns the canonical spelling of a socket type name matched
// case-insensitively, or "" when it is not one zmq4 knows.
func canonicalType(v []byte) string {
	for _, t := range socketTypes {
		if len(v) == len(t) && asciiLower(v) == asciiLower([]byte(t)) {
			return t
		}
	}
	return ""
}

// EncodeReady returns a complete READY command frame (header included) whose
// only property is Socket-Type. This is what zmq4 is shown instead of the
// peer's own READY, so it never sees a peer-chosen Identity.
//
// CheckGreeting, ParseReady and EncodeReady serve ipc/zmtp's transport,
// the Dealer, and the module's other hardened listener, the event bus
// (core/events), which filters its subscribers' handshakes the same way.
func EncodeReady(socketType string) []byte {
	bodyLen := 1 + len(cmdReady) + 1 + len(propSocketType) + 4 + len(socketType)
	b := make([]byte, 0, 2+bodyLen) // always < 256 bytes: a short frame
	b = append(b, FlagCommand, byte(bodyLen))
	b = append(b, byte(len(cmdReady)))
	b = append(b, cmdReady...)
	b = append(b, byte(len(propSocketType)))
	b = append(b, propSocketType...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(socketType)))
	b = append(b, socketType...)
	return b
}
