// Package ratelog rate-limits a kind of warning that a peer can trigger at
// will (a hostile plugin's malformed requests, a flood on the bus), so that
// it cannot fill the log, and says how many it held back.
package ratelog

import (
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limited writes at most 5 warnings at once and one a second after that.
// Its zero value is not usable: use New. Copies share their state.
type Limited struct {
	lim        *rate.Limiter
	suppressed *atomic.Uint64
}

// New returns a Limited.
func New() Limited {
	return Limited{lim: rate.NewLimiter(rate.Every(time.Second), 5), suppressed: new(atomic.Uint64)}
}

// Warn logs msg with args on l, with how many warnings it held back since
// the last one it wrote (suppressed_since_last_report), unless the limit
// holds this one back too.
func (r Limited) Warn(l *slog.Logger, msg string, args ...any) {
	if !r.lim.Allow() {
		r.suppressed.Add(1)
		return
	}
	l.Warn(msg, append(args, "suppressed_since_last_report", r.suppressed.Swap(0))...)
}
