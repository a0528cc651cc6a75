package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/runtime"
)

// The agent says it is done. An engine reports a container's end only
// once it has torn the container down: on Docker here that is 50–90 ms
// after the agent has exited (the init's exit, the engine's `die`, --rm's
// removal), longer than everything else of a warm reply. So the image's
// entrypoint (and the test agent) prints one line last on stdout once the
// agent has exited by itself,
//
//	\ncarapace-agent-done TOKEN STATUS\n
//
// where TOKEN is $CARAPACE_DONE, a random value the core gives each
// container that runs the image's agent (the entrypoint takes it out of
// the agent's environment), and STATUS the agent's exit status. The core
// takes the line out of the stream and hands on an Output with Done: the
// output before it is the agent's whole answer, and a channel's reply and
// a task run's end need not wait for the engine. The line comes on stdout,
// after everything the agent wrote there, so nothing of the answer can
// overtake it. It is not a security boundary: an agent that reads the
// token (the entrypoint's /proc environ) can print the line early and end
// its own answer there, no more — the session, its slot and its container
// live until the engine says the container is gone. An agent stopped by a
// signal prints none (its session ends with the stop's cause).
const (
	// envDone names the token's variable in the container.
	envDone = "CARAPACE_DONE"
	// doneWord starts the line, after its newline.
	doneWord = "carapace-agent-done"
)

// newDoneToken returns a fresh token: 96 random bits, in hex.
func newDoneToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// doneToken returns the token spec gives its container, or "".
func doneToken(spec runtime.Spec) string {
	for _, e := range spec.Env {
		if v, ok := strings.CutPrefix(e, envDone+"="); ok {
			return v
		}
	}
	return ""
}

// stdoutWriter returns the writer of a container's stdout for spec: one
// that finds the done line when spec gives a token, else w itself. Flush
// it once the engine's run has returned.
func stdoutWriter(spec runtime.Spec, w *outputWriter) interface {
	Write([]byte) (int, error)
	Flush()
} {
	t := doneToken(spec)
	if t == "" {
		return plainWriter{w}
	}
	return &doneWriter{out: w, mark: []byte("\n" + doneWord + " " + t + " ")}
}

// plainWriter is an outputWriter with nothing to flush.
type plainWriter struct{ *outputWriter }

func (plainWriter) Flush() {}

// doneWriter passes a container's stdout on and takes the done line out
// of it, wherever the engine's writes split it: a write that ends in what
// may be the start of the line is held back until the next shows whether
// it is. After the line, everything is passed on as it comes.
type doneWriter struct {
	out  *outputWriter
	mark []byte // "\ncarapace-agent-done TOKEN "
	held []byte
	done bool
}

// maxStatusDigits bounds the status's digits (0–255).
const maxStatusDigits = 3

func (w *doneWriter) Write(p []byte) (int, error) {
	if w.done {
		return w.out.Write(p)
	}
	data := p
	if len(w.held) > 0 {
		data = append(w.held, p...)
		w.held = nil
	}
	for {
		i := bytes.Index(data, w.mark)
		if i < 0 {
			k := overlap(data, w.mark)
			w.emit(data[:len(data)-k])
			w.held = bytes.Clone(data[len(data)-k:])
			return len(p), nil
		}
		status, n, st := parseStatus(data[i+len(w.mark):])
		switch st {
		case statusWhole:
			w.emit(data[:i])
			w.done = true
			select {
			case w.out.ch <- api.Output{Done: &status}:
			case <-w.out.closed:
			}
			w.emit(data[i+len(w.mark)+n:])
			return len(p), nil
		case statusPartial:
			w.emit(data[:i])
			w.held = bytes.Clone(data[i:])
			return len(p), nil
		default: // not the line: pass its newline on and look further
			w.emit(data[:i+1])
			data = data[i+1:]
		}
	}
}

// Flush passes on what is held back: the stream ended inside what could
// have been the done line, so it was output.
func (w *doneWriter) Flush() {
	w.emit(w.held)
	w.held = nil
}

func (w *doneWriter) emit(b []byte) {
	if len(b) > 0 {
		_, _ = w.out.Write(b)
	}
}

// overlap returns the length of the longest end of data that is a
// proper beginning of mark.
func overlap(data, mark []byte) int {
	for k := min(len(data), len(mark)-1); k > 0; k-- {
		if bytes.Equal(data[len(data)-k:], mark[:k]) {
			return k
		}
	}
	return 0
}

// How a status after the mark reads.
const (
	statusBad     = iota // not a status: the mark was output
	statusPartial        // digits so far, no newline yet
	statusWhole          // digits and the newline
)

// parseStatus reads "STATUS\n" at the start of b: 1–3 digits, at most
// 255. n counts the bytes read, the newline included.
func parseStatus(b []byte) (status, n, state int) {
	for n < len(b) && n <= maxStatusDigits {
		c := b[n]
		switch {
		case c >= '0' && c <= '9':
			status = status*10 + int(c-'0')
			n++
			continue
		case c == '\n' && n > 0 && status <= 255:
			return status, n + 1, statusWhole
		}
		return 0, 0, statusBad
	}
	if n > maxStatusDigits {
		return 0, 0, statusBad
	}
	return 0, 0, statusPartial
}
