package pluginhost

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// The handler's stdout and stderr are logged line by line, each line capped
// and the lines of both streams rate-limited together; the pipes are always
// drained, so a chatty handler never blocks on a write.
const (
	maxLine     = 1024 // bytes of a line that are logged
	outputRate  = 50   // lines per second, after the burst
	outputBurst = 100
)

// pump logs one stream until EOF (or until closeOutput closes it).
func (p *Process) pump(stream string, r *os.File, lim *rate.Limiter) {
	defer p.output.Done()
	br := bufio.NewReaderSize(r, maxLine)
	suppressed := 0
	flush := func() {
		if suppressed > 0 {
			p.log.Warn("plugin output suppressed", "stream", stream, "lines", suppressed)
			suppressed = 0
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		if len(line) == 0 && err != nil {
			break
		}
		truncated := errors.Is(err, bufio.ErrBufferFull)
		allowed := lim.Allow()
		var text string
		if allowed {
			text = strings.ToValidUTF8(string(bytes.TrimRight(line, "\r\n")), "\uFFFD")
		}
		for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of a long line
			_, err = br.ReadSlice('\n')
		}
		if allowed {
			flush()
			if truncated {
				p.log.Info("plugin output", "stream", stream, "line", text, "truncated", true)
			} else {
				p.log.Info("plugin output", "stream", stream, "line", text)
			}
		} else {
			suppressed++
		}
		if err != nil {
			break
		}
	}
	flush()
}

// closeOutput waits for the pumps to reach EOF, which they do when the
// process group is gone; after exitGrace (a child escaped the group and
// holds the pipe) it closes the pipes under them.
func (p *Process) closeOutput() {
	done := make(chan struct{})
	go func() {
		p.output.Wait()
		close(done)
	}()
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.log.Warn("plugin output still open after the exit: closing it")
	}
	for _, f := range p.pipes {
		_ = f.Close()
	}
	<-done
}
