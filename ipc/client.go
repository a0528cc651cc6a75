package ipc

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

// Client defaults.
const (
	DefaultEndpoint      = "ipc:///run/carapace/ipc.sock"
	DefaultTimeout       = 35 * time.Second // must exceed the core's 30 s handler timeout
	DefaultRetryInterval = 10 * time.Second
	DefaultConnectWait   = 5 * time.Second

	handshakeTimeout = 3 * time.Second // connect, greeting, READY and the request, each attempt
)

// ClientOptions tune Call. Zero values take the defaults.
type ClientOptions struct {
	Timeout       time.Duration // the whole call, resends included
	RetryInterval time.Duration // Lazy Pirate: reconnect and resend after this long without an answer
	ConnectWait   time.Duration // how long to keep trying to reach a core that is not listening
	// OnPending is called when the core says the request waits for the
	// user's confirmation; the call's deadline is extended to cover it.
	OnPending func(Confirmation)
	// OnAlarm, if set, is called once when the call has lasted AlarmAfter
	// and still waits — for the core's answer, for its socket, or between
	// attempts to reach it. It is called from within those waits (on Linux
	// from the calling goroutine, elsewhere perhaps from another), never
	// by a timer of its own: see wire.Alarm. bin/ipc catches signals from
	// there.
	AlarmAfter time.Duration
	OnAlarm    func()
}

// NewCorrelation returns a random correlation id: 32 hex digits from the
// runtime's generator (math/rand/v2, seeded by the operating system). A
// correlation is not a secret — the agent may choose its own — only unique
// within a session, and crypto/rand's start-up was a measurable share of
// an ipc run.
func NewCorrelation() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// EncodeRequest builds a wire message, checking the arguments and the size
// limit on this side too.
func EncodeRequest(topic, correlation string, args []byte) ([]byte, *Error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args = []byte("{}")
	}
	if !json.Valid(args) || args[0] != '{' {
		return nil, &Error{Code: CodeValidationFailed, Field: "arguments", Message: "arguments must be a JSON object, e.g. '{\"message\": \"hi\"}'"}
	}
	// The wire message by hand, as encoding/json would write it (arguments
	// are already valid JSON and go as they are): its reflection caches are
	// not worth building for one message per process.
	wire := make([]byte, 0, len(args)+len(topic)+len(correlation)+48)
	wire = append(wire, `{"topic":`...)
	wire = AppendJSONString(wire, topic)
	wire = append(wire, `,"correlation":`...)
	wire = AppendJSONString(wire, correlation)
	wire = append(wire, `,"arguments":`...)
	wire = append(wire, args...)
	wire = append(wire, '}')
	if len(wire) > MaxRequestBytes {
		return nil, &Error{Code: CodeValidationFailed, Field: "arguments", Message: "request of " + strconv.Itoa(len(wire)) + " bytes exceeds the " + strconv.Itoa(MaxRequestBytes) + "-byte limit"}
	}
	return wire, nil
}

// AppendJSONString appends s as a JSON string, byte for byte as encoding/json
// writes it: quote and backslash escaped, control characters as \b, \f,
// \n, \r, \t or \u00XX, <, > and & as \u003c, \u003e and \u0026, U+2028
// and U+2029 escaped, invalid UTF-8 as \ufffd (FuzzEncodeString).
func AppendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Call sends one request to the core at endpoint and waits for its answer,
// Lazy Pirate style: bounded waits, and on silence a new connection and a
// resend with the same correlation (the core answers a repeat from its
// cache, so the request never runs twice). It returns the result object or
// a structured error; transport failures are structured errors too.
func Call(ctx context.Context, endpoint, topic string, args []byte, opts ClientOptions) (json.RawMessage, *Error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = DefaultRetryInterval
	}
	if opts.ConnectWait <= 0 {
		opts.ConnectWait = DefaultConnectWait
	}
	correlation := NewCorrelation()
	req, werr := EncodeRequest(topic, correlation, args)
	if werr != nil {
		return nil, werr
	}
	path, err := wire.Path(endpoint)
	if err != nil {
		return nil, &Error{Code: CodePluginUnavailable, Message: "bad endpoint " + strconv.Quote(endpoint) + ": " + err.Error()}
	}
	start := time.Now()
	var alarm *wire.Alarm
	if opts.OnAlarm != nil {
		alarm = wire.NewAlarm(start.Add(opts.AlarmAfter), opts.OnAlarm)
	}
	deadline := start.Add(opts.Timeout)
	connectBy := start.Add(min(opts.ConnectWait, opts.Timeout))
	backoff := 50 * time.Millisecond
	var lastErr error
	for {
		if ctx.Err() != nil {
			return nil, &Error{Code: CodePluginTimeout, Message: "interrupted before the core answered", Retriable: true}
		}
		res, e, retry := attempt(ctx, path, req, correlation, &deadline, opts, alarm)
		if !retry {
			return res, e
		}
		now := time.Now()
		if e != nil && e.Code == CodePluginUnavailable { // could not connect
			lastErr = e
			if now.After(connectBy) {
				return nil, &Error{Code: CodePluginUnavailable, Retriable: true,
					Message: "cannot reach the Carapace core at " + endpoint + ": " + lastErr.(*Error).Message}
			}
			alarm.Sleep(min(backoff, time.Until(connectBy)))
			backoff = min(backoff*2, time.Second)
			continue
		}
		connectBy = now.Add(min(opts.ConnectWait, time.Until(deadline)))
		if now.After(deadline) {
			return nil, &Error{Code: CodePluginTimeout, Retriable: true,
				Message: "no answer from the Carapace core within " + opts.Timeout.Round(time.Millisecond).String()}
		}
	}
}

// attempt makes one connection, sends the request and waits up to the retry
// interval. retry is true when the caller should reconnect and resend.
//
// It speaks ZMTP through package wire, synchronously: no zmq4 socket and no
// goroutine, which is most of what starting the ipc binary used to cost
// (docs/PERFORMANCE.md). The core's greeting, READY (a ROUTER) and every
// frame header are checked as before.
func attempt(ctx context.Context, path string, req []byte, correlation string, deadline *time.Time, opts ClientOptions, alarm *wire.Alarm) (json.RawMessage, *Error, bool) {
	// The request goes in the handshake's write; the core reads it once
	// the handshake is done.
	d, err := wire.DialAlarm(ctx, path, earliest(time.Now().Add(handshakeTimeout), *deadline), wire.Limits{}, req, alarm)
	if err != nil {
		return nil, &Error{Code: CodePluginUnavailable, Message: dialReason(err)}, true
	}
	defer d.Close()
	// An interrupt unblocks a Recv by closing the connection; no goroutine
	// waits for it.
	defer context.AfterFunc(ctx, func() { _ = d.Close() })()
	wait := earliest(time.Now().Add(opts.RetryInterval), *deadline)
	for {
		if err := d.SetReadDeadline(wait); err != nil {
			return nil, &Error{Code: CodePluginTimeout, Message: "connection closed"}, true
		}
		f, err := d.Recv()
		switch {
		case ctx.Err() != nil:
			return nil, &Error{Code: CodePluginTimeout, Message: "interrupted before the core answered", Retriable: true}, false
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, &Error{Code: CodePluginTimeout, Message: "no answer yet"}, true
		case err != nil:
			return nil, &Error{Code: CodePluginTimeout, Message: "connection closed"}, true
		}
		resp, err := decodeAnswer(f)
		if err != nil {
			return nil, &Error{Code: CodePluginError, Message: "invalid answer from the core: " + err.Error()}, false
		}
		if resp.Correlation != "" && resp.Correlation != correlation {
			continue // a stale answer; keep waiting for ours
		}
		if resp.Type == TypePending {
			if opts.OnPending != nil {
				opts.OnPending(*resp.Payload.Confirmation)
			}
			// Wait for the user, then for the handler.
			if ext := resp.Payload.Confirmation.ExpiresAt.Add(DefaultTimeout); ext.After(*deadline) {
				*deadline = ext
			}
			wait = *deadline
			continue
		}
		if resp.Payload.Error != nil {
			return nil, resp.Payload.Error, false
		}
		return resp.Payload.Result, nil, false
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// dialReason says why a dial failed without the library's wrapping.
func dialReason(err error) string {
	for u := err; u != nil; {
		next, ok := u.(interface{ Unwrap() error })
		if !ok {
			return u.Error()
		}
		if n := next.Unwrap(); n != nil {
			u = n
			continue
		}
		return u.Error()
	}
	return err.Error()
}
