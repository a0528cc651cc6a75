// Command ipc is the agent container's only way out. By default it sends one
// tool call to the Carapace core over the session's Unix socket and prints
// the answer:
//
//	ipc <topic> [<arguments-json> | -]
//
// The result object goes to stdout (exit 0). An error goes to stderr as one
// JSON object {code, message, retriable, stage?, field?, retry_after?}
// (exit 1), unreachable cores and timeouts included. Usage errors exit 2.
// While a call waits for the user's confirmation a status line, also JSON,
// is written to stderr first; an error is always the last line. SIGINT or
// SIGTERM ends a call that has waited 25 ms or more with such an error
// (PLUGIN_TIMEOUT, "interrupted before the core answered"); one sooner
// ends ipc as it ends any program.
//
// "relay" is not a topic (topics are tool.invoke.<tool>): it was the model
// API relay's mode, which is now its own binary, ipc-relay, so that what the
// relay links (net, log/slog, flag) runs no initialisers on every tool call.
// `ipc relay ...` is a usage error that says so.
//
// It is static, has no cgo, and links neither net/http nor os/exec; on Linux
// it does not link net either: it speaks to the core with raw syscalls
// (ipc/zmtp/wire). Nor does it link fmt or encoding/json's reflective
// encoder and decoder, about a twentieth of its start: its JSON is read
// and written by hand (ipc's decodeAnswer and Error.AppendJSON, statusLine
// here), each tested against encoding/json.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/ipc"
)

const usage = `usage: ipc <topic> [<arguments-json> | -]

Sends one tool call to the Carapace core and prints the result.

  topic            tool.invoke.<tool>, e.g. tool.invoke.list_tools
  arguments-json   a JSON object; "-" reads it from stdin; omitted means {}

The result object is printed on stdout (exit 0). Errors are printed on stderr
as a JSON object {code, message, retriable, stage?, field?, retry_after?}
(exit 1). Usage errors exit 2.

Environment:
  CARAPACE_IPC_ENDPOINT   core socket (default ipc:///run/carapace/ipc.sock)
  CARAPACE_IPC_TIMEOUT    whole-call timeout, e.g. 35s or 35 (default 35s)
  CARAPACE_IPC_RETRY      resend after this long without an answer (default 10s)
`

// signalDelay is how long a call runs before SIGINT and SIGTERM are
// caught to end it with a JSON error.
const signalDelay = 25 * time.Millisecond

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "relay" {
		io.WriteString(stderr, "ipc: the model API relay is its own binary: ipc-relay --listen 127.0.0.1:PORT [--socket PATH] (ipc-relay --help)\n\n"+usage)
		return 2
	}
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		io.WriteString(stdout, usage)
		return 0
	}
	if len(args) < 1 || len(args) > 2 || args[0] == "" || args[0][0] == '-' {
		io.WriteString(stderr, usage)
		return 2
	}
	opts := ipc.ClientOptions{OnPending: func(c ipc.Confirmation) { stderr.Write(append(statusLine(c), '\n')) }}
	var err error
	if opts.Timeout, err = envDuration("CARAPACE_IPC_TIMEOUT"); err != nil {
		io.WriteString(stderr, "ipc: "+err.Error()+"\n")
		return 2
	}
	if opts.RetryInterval, err = envDuration("CARAPACE_IPC_RETRY"); err != nil {
		io.WriteString(stderr, "ipc: "+err.Error()+"\n")
		return 2
	}
	var body []byte
	if len(args) == 2 {
		if args[1] == "-" {
			body, err = io.ReadAll(io.LimitReader(stdin, ipc.MaxRequestBytes+1))
			if err != nil {
				return fail(stderr, &ipc.Error{Code: ipc.CodeValidationFailed, Field: "arguments", Message: "cannot read arguments from stdin"})
			}
		} else {
			body = []byte(args[1])
		}
	}
	if len(body) > ipc.MaxRequestBytes {
		return fail(stderr, &ipc.Error{Code: ipc.CodeValidationFailed, Field: "arguments", Message: "arguments exceed the " + strconv.Itoa(ipc.MaxRequestBytes) + "-byte limit"})
	}
	endpoint := os.Getenv("CARAPACE_IPC_ENDPOINT")
	if endpoint == "" {
		endpoint = ipc.DefaultEndpoint
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// SIGINT and SIGTERM end a call with its JSON error, once it has
	// waited signalDelay: most calls are answered sooner, and arming
	// signal delivery (a goroutine and a thread of the runtime's) was a
	// tenth of an ipc run. A signal before then ends ipc as it ends any
	// program, with no JSON line. The call's own waits arm it (an alarm,
	// not a timer: the first runtime timer starts the network poller,
	// another tenth of a run).
	opts.AlarmAfter = signalDelay
	opts.OnAlarm = func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-sigs
			cancel()
		}()
	}
	res, e := ipc.Call(ctx, endpoint, args[0], body, opts)
	if e != nil {
		return fail(stderr, e)
	}
	stdout.Write(append(res, '\n'))
	return 0
}

func fail(w io.Writer, e *ipc.Error) int {
	w.Write(append(e.AppendJSON(nil), '\n'))
	return 1
}

// statusLine is the JSON line that says a call waits for the user, as
// encoding/json writes a map of its four members (keys in order).
func statusLine(c ipc.Confirmation) []byte {
	b := append([]byte(nil), `{"confirmation":`...)
	b = ipc.AppendJSONString(b, c.ID)
	b = append(b, `,"expires_at":`...)
	at, err := c.ExpiresAt.MarshalJSON()
	if err != nil { // a year outside [0,9999]: the core never sends one
		at = []byte(`null`)
	}
	b = append(b, at...)
	b = append(b, `,"hint":`...)
	b = ipc.AppendJSONString(b, "the user must approve this call on the host (carapace confirm approve "+c.ID+")")
	return append(b, `,"status":"waiting_for_confirmation"}`...)
}

// envDuration parses a duration ("35s") or whole seconds ("35"); unset is 0.
func envDuration(name string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errors.New(name + "=" + strconv.Quote(v) + ": want a positive duration like 35s")
	}
	return d, nil
}
