package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLimited(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	r := New()
	for range 20 {
		r.Warn(l, "bad request", "plugin", "x")
	}
	if n := strings.Count(buf.String(), "bad request"); n != 5 {
		t.Fatalf("%d warnings written of 20 at once, want the burst of 5:\n%s", n, buf.String())
	}
	r.lim.SetLimit(1e9) // the next one passes, and says how many were held back
	buf.Reset()
	r.Warn(l, "bad request")
	if !strings.Contains(buf.String(), "suppressed_since_last_report=15") {
		t.Errorf("the next warning: %s", buf.String())
	}
}
