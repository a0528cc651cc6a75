package pluginproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The egress wire: how a confined plugin, which cannot create sockets,
// asks the core for a TCP connection (core/egress on the core's side,
// plugin.Dial on the plugin's).
//
// The core gives the handler one SOCK_SEQPACKET Unix socket (SOCK_DGRAM on
// macOS, which has no SEQPACKET Unix sockets; both keep message
// boundaries), at the descriptor number in EnvEgressFD. To connect, the
// plugin makes a socketpair(AF_UNIX, SOCK_STREAM), sends one message on
// the inherited socket holding an EgressRequest with exactly one
// descriptor attached (SCM_RIGHTS: one end of the pair), closes that end,
// and reads one EgressReply line on the other. After a reply with OK, that
// end is the connection: the core relays its bytes to and from the TCP
// connection it dialled. TLS stays in the plugin; the core sees hosts,
// ports and byte counts. docs/PLUGIN-PROTOCOL.md#network has the rules.

// EgressVersion is the version of an EgressRequest; a request of another
// version is malformed.
const EgressVersion = 1

// EgressNetworkTCP is the only network an EgressRequest may name: there is
// no UDP (and so no DNS) for a plugin.
const EgressNetworkTCP = "tcp"

// Limits of the egress wire.
const (
	// MaxEgressRequest is the largest request message, in bytes; a longer
	// one is malformed.
	MaxEgressRequest = 1024
	// MaxEgressReply is the largest reply line, newline included.
	MaxEgressReply = 1024
)

// Codes of a refused EgressRequest (EgressReply.Code).
const (
	EgressHostNotDeclared = "HOST_NOT_DECLARED" // host and port are not among the plugin's declared hosts
	EgressAddressRefused  = "ADDRESS_REFUSED"   // every address of the host is in a refused range (loopback, private, metadata ...)
	EgressResolveFailed   = "RESOLVE_FAILED"    // the core could not resolve the name
	EgressDialFailed      = "DIAL_FAILED"       // no address of the host accepted the connection in time
	EgressTooMany         = "TOO_MANY"          // the plugin has as many connections open as it may
	EgressBadRequest      = "BAD_REQUEST"       // a readable request the core cannot serve: not "tcp", port 0, a malformed host
)

// EgressCodes lists every code of a refused request, in the order above.
var EgressCodes = []string{EgressHostNotDeclared, EgressAddressRefused, EgressResolveFailed, EgressDialFailed, EgressTooMany, EgressBadRequest}

// EgressRequest is the message a plugin sends on its egress socket, with
// one descriptor attached.
type EgressRequest struct {
	V       int    `json:"v"`       // EgressVersion
	Network string `json:"network"` // EgressNetworkTCP
	Host    string `json:"host"`    // a DNS name or an IP literal, as declared
	Port    uint16 `json:"port"`    // 1 to 65535
}

// EgressReply is the one line the core writes on the passed stream before
// it relays anything: OK and the address dialled, or a Code and a message
// for a person.
type EgressReply struct {
	OK   bool   `json:"ok"`
	Addr string `json:"addr,omitempty"` // OK: the address connected to, "ip:port"
	// FakeIP, with OK: Addr is special (198.18.0.0/15 or fc00::/7) and
	// the core accepted it as a fake-IP DNS answer the user opted into
	// ([network] fake_ip in config.toml). A plugin that checks the address
	// again defers to this: the core owns the decision.
	FakeIP bool   `json:"fake_ip,omitempty"`
	Code   string `json:"code,omitempty"`  // not OK: one of EgressCodes
	Error  string `json:"error,omitempty"` // not OK: one line for a person
}

// EncodeEgressRequest returns the request message, or an error wrapping
// ErrTooLarge if it exceeds MaxEgressRequest.
func EncodeEgressRequest(r *EgressRequest) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("pluginproto: encode egress request: %w", err)
	}
	if len(b) > MaxEgressRequest {
		return nil, fmt.Errorf("%w: egress request of %d bytes (limit %d)", ErrTooLarge, len(b), MaxEgressRequest)
	}
	return b, nil
}

// DecodeEgressRequest parses a request message strictly, as the core
// reads what a plugin sends: at most MaxEgressRequest bytes, exactly one
// JSON object with no field but those of EgressRequest, of version
// EgressVersion. Anything else wraps ErrMalformed. What it asks for
// (network, host, port) is checked by the core, not here.
func DecodeEgressRequest(b []byte) (*EgressRequest, error) {
	if len(b) > MaxEgressRequest {
		return nil, fmt.Errorf("%w: egress request of %d bytes (limit %d)", ErrMalformed, len(b), MaxEgressRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r *EgressRequest // null leaves it nil
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: egress request: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: egress request: data after the JSON value", ErrMalformed)
	}
	if r == nil {
		return nil, fmt.Errorf("%w: egress request: null", ErrMalformed)
	}
	if r.V != EgressVersion {
		return nil, fmt.Errorf("%w: egress request of version %d (this core reads %d)", ErrMalformed, r.V, EgressVersion)
	}
	return r, nil
}

// EncodeEgressReply returns r as one line, newline included, of at most
// MaxEgressReply bytes: Error is made valid UTF-8, flattened to one line,
// and cut (on a character boundary) to fit.
func EncodeEgressReply(r *EgressReply) []byte {
	full := strings.Join(strings.Fields(strings.ToValidUTF8(r.Error, "\uFFFD")), " ")
	line := func(n int) []byte { // r with the first n bytes of the message
		c := *r
		c.Error = full[:n]
		b, err := json.Marshal(&c)
		if err != nil { // strings and a bool: cannot fail
			return []byte(`{"ok":false,"code":"` + EgressBadRequest + `","error":"reply not encodable"}`)
		}
		return b
	}
	if b := line(len(full)); len(b) < MaxEgressReply {
		return append(b, '\n')
	}
	// The longest prefix that fits: escapes make the encoding longer
	// than the text by a factor of up to 6, so search.
	lo, hi := 0, len(full) // line(lo) fits, line(hi) does not
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; len(line(mid)) < MaxEgressReply {
			lo = mid
		} else {
			hi = mid
		}
	}
	for lo > 0 && !utf8.RuneStart(full[lo]) {
		lo--
	}
	return append(line(lo), '\n')
}

// DecodeEgressReply parses a reply line (with or without its newline), as
// the SDK reads it: one JSON object. Unknown fields are ignored (the
// reply may grow); an OK reply without an address, or a refusal without a
// code, is malformed.
func DecodeEgressReply(line []byte) (*EgressReply, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	var r *EgressReply
	if err := decodeOne(line, &r, false); err != nil {
		return nil, fmt.Errorf("egress reply: %w", err)
	}
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: egress reply: null", ErrMalformed)
	case r.OK && r.Addr == "":
		return nil, fmt.Errorf("%w: egress reply: ok without an address", ErrMalformed)
	case !r.OK && r.Code == "":
		return nil, fmt.Errorf("%w: egress reply: refused without a code", ErrMalformed)
	}
	return r, nil
}
