package ipc

import (
	"fmt"
	"strconv"
)

// Code is a machine-readable error code carried in an error payload.
type Code string

// The ten error codes of the protocol. Pipeline codes are produced by the core
// at the stage named in their comment; handler codes are produced on behalf of
// a plugin handler, or by the handler itself (HANDLER_ERROR).
const (
	CodeUnknownTool         Code = "UNKNOWN_TOOL"         // stage 2: the topic names no catalogued tool
	CodeValidationFailed    Code = "VALIDATION_FAILED"    // stages 1 and 3: malformed wire message or arguments
	CodeUnauthorized        Code = "UNAUTHORIZED"         // stage 4: the group may not use the tool
	CodeRateLimited         Code = "RATE_LIMITED"         // stage 4: the session exceeded the tool's rate
	CodeConfirmationTimeout Code = "CONFIRMATION_TIMEOUT" // stage 5: nobody approved in time
	CodeConfirmationDenied  Code = "CONFIRMATION_DENIED"  // stage 5: the user denied the call
	CodePluginTimeout       Code = "PLUGIN_TIMEOUT"       // stage 6: the handler missed its deadline
	CodePluginUnavailable   Code = "PLUGIN_UNAVAILABLE"   // stage 6: the handler is not running (or the core is draining)
	CodePluginError         Code = "PLUGIN_ERROR"         // the handler failed unexpectedly; generic message only
	CodeHandlerError        Code = "HANDLER_ERROR"        // the handler reported an error of its own
)

// Codes lists every protocol error code, in the order of the table above.
var Codes = []Code{
	CodeUnknownTool, CodeValidationFailed, CodeUnauthorized, CodeRateLimited,
	CodeConfirmationTimeout, CodeConfirmationDenied, CodePluginTimeout,
	CodePluginUnavailable, CodePluginError, CodeHandlerError,
}

// Reserved reports whether c is one of the codes the pipeline reserves for
// itself. A handler that reports a reserved code has it normalised to
// HANDLER_ERROR, so a plugin can never impersonate the core.
func (c Code) Reserved() bool {
	switch c {
	case CodeHandlerError:
		return false
	}
	for _, k := range Codes {
		if k == c {
			return true
		}
	}
	return false
}

// Valid reports whether c is one of the ten protocol codes.
func (c Code) Valid() bool {
	for _, k := range Codes {
		if k == c {
			return true
		}
	}
	return false
}

// Error is the structured error payload of a response. Stage, Field and
// RetryAfter are present only when they apply.
type Error struct {
	Code       Code   `json:"code"`
	Message    string `json:"message"`
	Retriable  bool   `json:"retriable"`
	Stage      int    `json:"stage,omitempty"`       // pipeline stage 1–6 that produced the error
	Field      string `json:"field,omitempty"`       // the argument (or wire field) that failed validation
	RetryAfter int    `json:"retry_after,omitempty"` // seconds to wait before retrying
}

// Error implements the error interface.
func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Message
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	return s
}

// AppendJSON appends e as encoding/json writes it, byte for byte
// (TestErrorAppendJSON): bin/ipc prints its errors so without linking
// encoding/json's encoder.
func (e *Error) AppendJSON(b []byte) []byte {
	b = append(b, `{"code":`...)
	b = AppendJSONString(b, string(e.Code))
	b = append(b, `,"message":`...)
	b = AppendJSONString(b, e.Message)
	b = append(b, `,"retriable":`...)
	b = strconv.AppendBool(b, e.Retriable)
	if e.Stage != 0 {
		b = append(b, `,"stage":`...)
		b = strconv.AppendInt(b, int64(e.Stage), 10)
	}
	if e.Field != "" {
		b = append(b, `,"field":`...)
		b = AppendJSONString(b, e.Field)
	}
	if e.RetryAfter != 0 {
		b = append(b, `,"retry_after":`...)
		b = strconv.AppendInt(b, int64(e.RetryAfter), 10)
	}
	return append(b, '}')
}

// Errorf builds an error payload with a formatted message. Retriable is set
// from the code's usual meaning; callers adjust it when they know better.
func Errorf(code Code, stage int, format string, args ...any) *Error {
	return &Error{Code: code, Stage: stage, Message: fmt.Sprintf(format, args...), Retriable: retriableByDefault(code)}
}

func retriableByDefault(c Code) bool {
	switch c {
	case CodeRateLimited, CodePluginTimeout, CodePluginUnavailable, CodeConfirmationTimeout:
		return true
	}
	return false
}
