package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFilterMatch(t *testing.T) {
	e := func(session, corr, group, outcome string) *Entry {
		return &Entry{Session: session, Correlation: corr, Group: group, Outcome: outcome}
	}
	tests := []struct {
		name string
		f    Filter
		e    *Entry
		want bool
	}{
		{"zero filter matches all", Filter{}, e("s", "c", "g", OutcomeOK), true},
		{"zero filter matches empty entry", Filter{}, &Entry{}, true},
		{"session equal", Filter{Session: "s"}, e("s", "", "", ""), true},
		{"session differs", Filter{Session: "s"}, e("s2", "", "", ""), false},
		{"session is not a prefix match", Filter{Session: "s"}, e("s1", "", "", ""), false},
		{"session required", Filter{Session: "s"}, e("", "c", "g", OutcomeOK), false},
		{"correlation equal", Filter{Correlation: "c"}, e("", "c", "", ""), true},
		{"correlation differs", Filter{Correlation: "c"}, e("", "d", "", ""), false},
		{"group equal", Filter{Group: "g"}, e("", "", "g", ""), true},
		{"group differs", Filter{Group: "g"}, e("", "", "G", ""), false},
		{"all set, all equal", Filter{Session: "s", Correlation: "c", Group: "g", Outcome: OutcomeOK}, e("s", "c", "g", OutcomeOK), true},
		{"all set, one differs", Filter{Session: "s", Correlation: "c", Group: "g", Outcome: OutcomeOK}, e("s", "c", "x", OutcomeOK), false},
		{"outcome exact", Filter{Outcome: OutcomeDenied}, e("", "", "", OutcomeDenied), true},
		{"outcome differs", Filter{Outcome: OutcomeDenied}, e("", "", "", OutcomeApproved), false},
		{"rejected is exact", Filter{Outcome: OutcomeRejected}, e("", "", "", OutcomeRejected), true},
		{"rejected does not match error", Filter{Outcome: OutcomeRejected}, e("", "", "", OutcomeError), false},
		{"error matches error", Filter{Outcome: OutcomeError}, e("", "", "", OutcomeError), true},
		{"error matches rejected", Filter{Outcome: OutcomeError}, e("", "", "", OutcomeRejected), true},
		{"error skips ok", Filter{Outcome: OutcomeError}, e("", "", "", OutcomeOK), false},
		{"error skips denied", Filter{Outcome: OutcomeError}, e("", "", "", OutcomeDenied), false},
		{"error skips expired", Filter{Outcome: OutcomeError}, e("", "", "", OutcomeExpired), false},
		{"error and session", Filter{Outcome: OutcomeError, Session: "s"}, e("t", "", "", OutcomeError), false},
		{"Last is ignored", Filter{Last: 1}, e("s", "", "", OutcomeOK), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.Match(tt.e); got != tt.want {
				t.Errorf("%+v.Match(%+v) = %v, want %v", tt.f, tt.e, got, tt.want)
			}
		})
	}
}

func TestReadMissing(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{
		filepath.Join(dir, "audit.jsonl"),
		filepath.Join(dir, "no", "such", "dir", "audit.jsonl"),
	} {
		got, st, err := ReadStats(path, Filter{})
		if err != nil || len(got) != 0 || st != (Stats{}) {
			t.Errorf("ReadStats(%s) = %v, %+v, %v; want empty, no error", path, got, st, err)
		}
	}
}

func TestReadDirectoryIsAnError(t *testing.T) {
	if _, err := Read(t.TempDir(), Filter{}); err == nil {
		t.Error("Read of a directory returned nil error")
	}
}

// line is the JSON line of an entry, with a fixed time.
func line(t *testing.T, e *Entry) string {
	t.Helper()
	if e.Time.IsZero() {
		e.Time = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadMalformed(t *testing.T) {
	good := func(i int) string { return line(t, ent("s", i)) }
	tests := []struct {
		name      string
		data      string
		want      string // ids
		malformed int
	}{
		{"empty file", "", "", 0},
		{"clean", good(0) + "\n" + good(1) + "\n", "s-0 s-1", 0},
		{"blank lines ignored", "\n" + good(0) + "\n\n  \n" + good(1) + "\n", "s-0 s-1", 0},
		{"garbage", good(0) + "\nnot json\n" + good(1) + "\n", "s-0 s-1", 1},
		{"not entries", "{}\nnull\n[1]\n\"x\"\n{\"timestamp\":1}\n" + good(0) + "\n", "s-0", 5},
		{"truncated last line", good(0) + "\n" + good(1)[:40], "s-0", 1},
		{"last line complete but no newline", good(0) + "\n" + good(1), "s-0 s-1", 0},
		{"fragment glued to a line", good(0)[:30] + good(1) + "\n" + good(2) + "\n", "s-2", 1},
		{"over-long line", good(0) + "\n" + `{"reason":"` + strings.Repeat("x", MaxLineBytes) + "\"}\n" + good(1) + "\n", "s-0 s-1", 1},
		{"over-long unterminated tail", good(0) + "\n" + strings.Repeat("x", MaxLineBytes+100), "s-0", 1},
		{"long line under the limit", good(0) + "\n" + line(t, &Entry{ID: "big", Reason: strings.Repeat("y", 200<<10)}) + "\n", "s-0 big", 0},
		{"CRLF", good(0) + "\r\n" + good(1) + "\r\n", "s-0 s-1", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			writeFile(t, path, tt.data, 0o600)
			got, st := mustRead(t, path, Filter{})
			if g := strings.Join(ids(got), " "); g != tt.want || st.Malformed != tt.malformed {
				t.Errorf("read %q with %d malformed, want %q with %d", g, st.Malformed, tt.want, tt.malformed)
			}
			if st.Entries != len(got) {
				t.Errorf("Stats.Entries = %d, want %d", st.Entries, len(got))
			}
		})
	}
}

// Rotated files are read oldest first; only canonical path.N names count.
func TestReadOrderAcrossFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	files := map[string][]int{
		".12": {0, 1}, ".3": {2}, ".2": {3, 4}, ".1": {5}, "": {6, 7},
		".01": {100}, ".1.gz": {101}, ".x": {102}, ".0": {103}, ".-1": {104},
	}
	for suffix, nums := range files {
		var b strings.Builder
		for _, n := range nums {
			b.WriteString(line(t, ent("s", n)) + "\n")
		}
		writeFile(t, path+suffix, b.String(), 0o600)
	}
	writeFile(t, filepath.Join(path+".4", "dir-in-the-way"), "", 0o600)

	tests := []struct {
		f    Filter
		want string
	}{
		{Filter{}, "s-0 s-1 s-2 s-3 s-4 s-5 s-6 s-7"},
		{Filter{Last: 3}, "s-5 s-6 s-7"},
		{Filter{Last: 4}, "s-4 s-5 s-6 s-7"},
		{Filter{Last: 8}, "s-0 s-1 s-2 s-3 s-4 s-5 s-6 s-7"},
		{Filter{Last: 100}, "s-0 s-1 s-2 s-3 s-4 s-5 s-6 s-7"},
		{Filter{Last: -1}, "s-0 s-1 s-2 s-3 s-4 s-5 s-6 s-7"},
		{Filter{Correlation: "c-3"}, "s-3"},
		{Filter{Correlation: "c-3", Last: 5}, "s-3"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.f), func(t *testing.T) {
			got, st := mustRead(t, path, tt.f)
			if g := strings.Join(ids(got), " "); g != tt.want {
				t.Errorf("read %q, want %q", g, tt.want)
			}
			if st.Files != 5 {
				t.Errorf("read %d files, want 5", st.Files)
			}
		})
	}
}

// A file reached under two names — as when a rotation renames it between
// two opens — is read once.
func TestReadSameFileTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeFile(t, path+".2", line(t, ent("s", 0))+"\n", 0o600)
	writeFile(t, path, line(t, ent("s", 1))+"\n", 0o600)
	if err := os.Link(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	got, st := mustRead(t, path, Filter{})
	if g := strings.Join(ids(got), " "); g != "s-0 s-1" || st.Files != 2 {
		t.Errorf("read %q from %d files, want \"s-0 s-1\" from 2", g, st.Files)
	}
}

func TestReadLastWithOutcomeFilter(t *testing.T) {
	l, path := openLog(t, Options{MaxBytes: 800, SyncInterval: -1})
	outcomes := []string{OutcomeRouted, OutcomeRejected, OutcomeOK, OutcomeError, OutcomeRouted, OutcomeRejected, OutcomeOK}
	for i, o := range outcomes {
		e := ent("s", i)
		e.Outcome = o
		mustWrite(t, l, e)
	}
	tests := []struct {
		f    Filter
		want string
	}{
		{Filter{Outcome: OutcomeError}, "s-1 s-3 s-5"},
		{Filter{Outcome: OutcomeError, Last: 2}, "s-3 s-5"},
		{Filter{Outcome: OutcomeRejected}, "s-1 s-5"},
		{Filter{Outcome: OutcomeOK, Last: 1}, "s-6"},
		{Filter{Outcome: OutcomeDenied}, ""},
	}
	for _, tt := range tests {
		got, _ := mustRead(t, path, tt.f)
		if g := strings.Join(ids(got), " "); g != tt.want {
			t.Errorf("%+v: read %q, want %q", tt.f, g, tt.want)
		}
	}
}

// A crash mid-write, seen by a reader: the log as the process left it.
func TestReadTruncatedByCrash(t *testing.T) {
	l, path := openLog(t, Options{SyncInterval: -1})
	for i := range 3 {
		mustWrite(t, l, ent("s", i))
	}
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-25); err != nil {
		t.Fatal(err)
	}
	got, stats := mustRead(t, path, Filter{})
	if g := strings.Join(ids(got), " "); g != "s-0 s-1" || stats.Malformed != 1 {
		t.Errorf("read %q with %d malformed, want \"s-0 s-1\" with 1", g, stats.Malformed)
	}
}

func TestCollector(t *testing.T) {
	for _, last := range []int{0, 1, 2, 3, 5, 7, 10} {
		c := newCollector(last)
		for i := range 7 {
			c.add(Entry{ID: fmt.Sprint(i)})
		}
		want := "0 1 2 3 4 5 6"
		if last > 0 && last < 7 {
			want = strings.Join(strings.Fields(want)[7-last:], " ")
		}
		if g := strings.Join(ids(c.entries()), " "); g != want {
			t.Errorf("last %d: %q, want %q", last, g, want)
		}
	}
}

// writeBig fills path with about size bytes of entries through a Log.
func writeBig(tb testing.TB, path string, size int64) int {
	tb.Helper()
	l, err := Open(path, Options{MaxBytes: size * 2, SyncInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	n := 0
	for l.size < size {
		e := ent(fmt.Sprintf("s%d", n%50), n)
		e.Reason = "arguments match the schema"
		if n%7 == 0 {
			e.Outcome = OutcomeRejected
		}
		if err := l.Write(e); err != nil {
			tb.Fatal(err)
		}
		n++
	}
	return n
}

func TestReadLargeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	n := writeBig(t, path, 10<<20)
	got, st := mustRead(t, path, Filter{})
	if len(got) != n || st.Malformed != 0 {
		t.Fatalf("read %d entries (%d malformed), want %d", len(got), st.Malformed, n)
	}
	last, _ := mustRead(t, path, Filter{Session: "s3", Last: 5})
	if len(last) != 5 || last[4].ID != got[lastIndex(got, "s3")].ID {
		t.Errorf("Last 5 of s3 = %v", ids(last))
	}
}

func lastIndex(es []Entry, session string) int {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Session == session {
			return i
		}
	}
	return -1
}

// BenchmarkRead reads a 10 MiB log, with and without a selective filter.
func BenchmarkRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.jsonl")
	writeBig(b, path, 10<<20)
	st, _ := os.Stat(path)
	for _, bc := range []struct {
		name string
		f    Filter
	}{
		{"all", Filter{}},
		{"session-last-20", Filter{Session: "s7", Last: 20}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(st.Size())
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Read(path, bc.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
