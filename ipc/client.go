package ipc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// Client defaults.
const (
	DefaultEndpoint      = "ipc:///run/carapace/ipc.sock"
	DefaultTimeout       = 35 * time.Second // must exceed the core's 30 s handler timeout
	DefaultRetryInterval = 10 * time.Second
	DefaultConnectWait   = 5 * time.Second
)

// ClientOptions tune Call. Zero values take the defaults.
type ClientOptions struct {
	Timeout       time.Duration // the whole call, resends included
	RetryInterval time.Duration // Lazy Pirate: reconnect and resend after this long without an answer
	ConnectWait   time.Duration // how long to keep trying to reach a core that is not listening
	// OnPending is called when the core says the request waits for the
	// user's confirmation; the call's deadline is extended to cover it.
	OnPending func(Confirmation)
}

// NewCorrelation returns a random correlation id.
func NewCorrelation() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
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
	wire, err := json.Marshal(Request{Topic: topic, Correlation: correlation, Arguments: json.RawMessage(args)})
	if err != nil {
		return nil, &Error{Code: CodeValidationFailed, Field: "arguments", Message: "arguments cannot be encoded: " + err.Error()}
	}
	if len(wire) > MaxRequestBytes {
		return nil, &Error{Code: CodeValidationFailed, Field: "arguments", Message: fmt.Sprintf("request of %d bytes exceeds the %d-byte limit", len(wire), MaxRequestBytes)}
	}
	return wire, nil
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
	wire, werr := EncodeRequest(topic, correlation, args)
	if werr != nil {
		return nil, werr
	}
	ep, err := zmtp.Endpoint(endpoint)
	if err != nil {
		return nil, &Error{Code: CodePluginUnavailable, Message: fmt.Sprintf("bad endpoint %q: %v", endpoint, err)}
	}
	start := time.Now()
	deadline := start.Add(opts.Timeout)
	connectBy := start.Add(min(opts.ConnectWait, opts.Timeout))
	backoff := 50 * time.Millisecond
	var lastErr error
	for {
		if ctx.Err() != nil {
			return nil, &Error{Code: CodePluginTimeout, Message: "interrupted before the core answered", Retriable: true}
		}
		res, e, retry := attempt(ctx, ep, wire, correlation, &deadline, opts)
		if !retry {
			return res, e
		}
		now := time.Now()
		if e != nil && e.Code == CodePluginUnavailable { // could not connect
			lastErr = e
			if now.After(connectBy) {
				return nil, &Error{Code: CodePluginUnavailable, Retriable: true,
					Message: fmt.Sprintf("cannot reach the Carapace core at %s: %v", endpoint, lastErr.(*Error).Message)}
			}
			time.Sleep(min(backoff, time.Until(connectBy)))
			backoff = min(backoff*2, time.Second)
			continue
		}
		connectBy = now.Add(min(opts.ConnectWait, time.Until(deadline)))
		if now.After(deadline) {
			return nil, &Error{Code: CodePluginTimeout, Retriable: true,
				Message: fmt.Sprintf("no answer from the Carapace core within %s", opts.Timeout.Round(time.Millisecond))}
		}
	}
}

// attempt makes one connection, sends the request and waits up to the retry
// interval. retry is true when the caller should reconnect and resend.
func attempt(ctx context.Context, ep string, wire []byte, correlation string, deadline *time.Time, opts ClientOptions) (json.RawMessage, *Error, bool) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := zmq4.NewDealer(actx, zmq4.WithDialerMaxRetries(0), zmq4.WithDialerTimeout(2*time.Second),
		zmq4.WithTimeout(5*time.Second), zmq4.WithLogger(log.New(io.Discard, "", 0)))
	defer d.Close()
	if err := d.Dial(ep); err != nil {
		return nil, &Error{Code: CodePluginUnavailable, Message: dialReason(err)}, true
	}
	if err := d.Send(zmq4.NewMsg(wire)); err != nil {
		return nil, &Error{Code: CodePluginUnavailable, Message: "send failed"}, true
	}
	frames := make(chan []byte, 4)
	go func() {
		defer close(frames)
		for {
			msg, err := d.Recv()
			if err != nil {
				return
			}
			if msg.Type == zmq4.CmdMsg || len(msg.Frames) == 0 {
				continue
			}
			select {
			case frames <- msg.Frames[len(msg.Frames)-1]:
			case <-actx.Done():
				return
			}
		}
	}()
	wait := time.NewTimer(min(opts.RetryInterval, time.Until(*deadline)))
	defer wait.Stop()
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				return nil, &Error{Code: CodePluginTimeout, Message: "connection closed"}, true
			}
			resp, err := DecodeResponse(f)
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
				wait.Reset(time.Until(*deadline))
				continue
			}
			if resp.Payload.Error != nil {
				return nil, resp.Payload.Error, false
			}
			return resp.Payload.Result, nil, false
		case <-wait.C:
			return nil, &Error{Code: CodePluginTimeout, Message: "no answer yet"}, true
		case <-ctx.Done():
			return nil, &Error{Code: CodePluginTimeout, Message: "interrupted before the core answered", Retriable: true}, false
		}
	}
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
