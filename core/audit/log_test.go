package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// openLog opens a log at dir/logs/audit.jsonl, closed when the test ends.
func openLog(t *testing.T, opts Options) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "logs", "audit.jsonl")
	l, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

// ent is a typical routed entry; id tells entries apart.
func ent(session string, i int) *Entry {
	return &Entry{
		ID:          fmt.Sprintf("%s-%d", session, i),
		Session:     session,
		Group:       "main",
		Source:      "core",
		Topic:       "tool.echo",
		Correlation: fmt.Sprintf("c-%d", i),
		Stage:       StageRoute,
		Outcome:     OutcomeRouted,
	}
}

func mustWrite(t *testing.T, l *Log, e *Entry) {
	t.Helper()
	if err := l.Write(e); err != nil {
		t.Fatalf("Write %s: %v", e.ID, err)
	}
}

func mustRead(t *testing.T, path string, f Filter) ([]Entry, Stats) {
	t.Helper()
	got, st, err := ReadStats(path, f)
	if err != nil {
		t.Fatalf("ReadStats: %v", err)
	}
	return got, st
}

func ids(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func perm(t *testing.T, path string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func TestOpenModes(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string) // before Open
		dirMode fs.FileMode                     // expected mode of the parent
	}{
		{"creates dir and file", func(*testing.T, string) {}, 0o700},
		{"narrows a world-readable file", func(t *testing.T, path string) {
			writeFile(t, path, "", 0o644)
		}, 0o700},
		{"narrows a world-writable file", func(t *testing.T, path string) {
			writeFile(t, path, "", 0o666)
			os.Chmod(path, 0o666) // past the umask
		}, 0o700},
		{"keeps an existing directory's mode", func(t *testing.T, path string) {
			if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
				t.Fatal(err)
			}
			os.Chmod(filepath.Dir(path), 0o750)
		}, 0o750},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "home", "logs", "audit.jsonl")
			tt.prepare(t, path)
			l, err := Open(path, Options{SyncInterval: -1})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.Close()
			mustWrite(t, l, ent("s", 1))
			if got := perm(t, path); got != 0o600 {
				t.Errorf("file mode = %o, want 600", got)
			}
			if got := perm(t, filepath.Dir(path)); got != tt.dirMode {
				t.Errorf("dir mode = %o, want %o", got, tt.dirMode)
			}
		})
	}
}

func writeFile(t *testing.T, path, data string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func TestRotatedFileMode(t *testing.T) {
	l, path := openLog(t, Options{MaxBytes: 300, MaxFiles: 2, SyncInterval: -1})
	for i := range 10 {
		mustWrite(t, l, ent("s", i))
	}
	for _, p := range []string{path, path + ".1", path + ".2"} {
		if got := perm(t, p); got != 0o600 {
			t.Errorf("%s mode = %o, want 600", filepath.Base(p), got)
		}
	}
}

func TestWriteTime(t *testing.T) {
	l, path := openLog(t, Options{SyncInterval: -1})
	fixed := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	zero := ent("s", 1)
	set := ent("s", 2)
	set.Time = fixed
	mustWrite(t, l, zero)
	mustWrite(t, l, set)

	if zero.Time.IsZero() || zero.Time.Location() != time.UTC {
		t.Errorf("zero Time became %v, want now in UTC", zero.Time)
	}
	if !set.Time.Equal(fixed) {
		t.Errorf("given Time changed to %v", set.Time)
	}
	got, _ := mustRead(t, path, Filter{})
	if len(got) != 2 || !got[0].Time.Equal(zero.Time) || !got[1].Time.Equal(fixed) {
		t.Errorf("read back %+v", got)
	}
}

// A field holding a newline and a forged entry must stay one line.
func TestWriteNoLineInjection(t *testing.T) {
	l, path := openLog(t, Options{SyncInterval: -1})
	e := ent("s", 1)
	e.Reason = "bad\n{\"timestamp\":\"2024-01-01T00:00:00Z\",\"source\":\"core\",\"stage\":\"core\",\"outcome\":\"ok\"}\r\n\u2028"
	mustWrite(t, l, e)
	got, st := mustRead(t, path, Filter{})
	if len(got) != 1 || st.Malformed != 0 || got[0].Reason != e.Reason {
		t.Fatalf("got %d entries (%d malformed), want exactly the one written: %+v", len(got), st.Malformed, got)
	}
	data, _ := os.ReadFile(path)
	if n := strings.Count(string(data), "\n"); n != 1 {
		t.Errorf("file has %d newlines, want 1", n)
	}
}

func TestConcurrentWriters(t *testing.T) {
	const writers, each = 8, 400
	// Rotation on: concurrent writes must survive it too. MaxFiles is large
	// enough that nothing is dropped.
	l, path := openLog(t, Options{MaxBytes: 64 << 10, MaxFiles: 100, SyncInterval: time.Millisecond})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := ent(fmt.Sprintf("w%d", w), i)
				e.Reason = strings.Repeat("r", (w*each+i)%500) // lines of varied length
				if err := l.Write(e); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	got, st := mustRead(t, path, Filter{})
	if st.Malformed != 0 {
		t.Errorf("%d malformed lines", st.Malformed)
	}
	if st.Files < 2 {
		t.Errorf("read %d files, want a rotation to have happened", st.Files)
	}
	if len(got) != writers*each {
		t.Fatalf("read %d entries, want %d", len(got), writers*each)
	}
	// Each writer's entries appear once and in its order; stamps taken
	// under the lock never go backwards in file order.
	next := map[string]int{}
	for i, e := range got {
		want := fmt.Sprintf("%s-%d", e.Session, next[e.Session])
		if e.ID != want {
			t.Fatalf("entry %d is %s, want %s", i, e.ID, want)
		}
		next[e.Session]++
		if i > 0 && e.Time.Before(got[i-1].Time) {
			t.Fatalf("entry %d time %v before previous %v", i, e.Time, got[i-1].Time)
		}
	}
}

func TestRotation(t *testing.T) {
	tests := []struct {
		name     string
		maxFiles int
		writes   int
	}{
		{"one kept", 1, 40},
		{"three kept", 3, 40},
		{"fewer rotations than MaxFiles", 10, 12},
	}
	// Entries of one length, so the files' contents can be predicted.
	fixed := func(i int) *Entry {
		e := ent("s", 100+i)
		e.Time = time.Date(2024, 1, 1, 0, 0, 0, 123456789, time.UTC)
		return e
	}
	const maxBytes = 600
	line, err := json.Marshal(fixed(0))
	if err != nil {
		t.Fatal(err)
	}
	perFile := maxBytes / (len(line) + 1)
	if perFile < 2 {
		t.Fatalf("entries of %d bytes: fix the test", len(line)+1)
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, path := openLog(t, Options{MaxBytes: maxBytes, MaxFiles: tt.maxFiles, SyncInterval: -1})
			for i := range tt.writes {
				mustWrite(t, l, fixed(i))
			}
			nums, err := rotatedNumbers(path)
			if err != nil {
				t.Fatal(err)
			}
			want := min((tt.writes-1)/perFile, tt.maxFiles)
			if len(nums) != want || (want > 0 && nums[len(nums)-1] != want) {
				t.Fatalf("rotated files %v, want .1 … .%d", nums, want)
			}
			for _, p := range append([]string{path}, names(path, nums)...) {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if st.Size() > maxBytes {
					t.Errorf("%s is %d bytes, over MaxBytes %d", filepath.Base(p), st.Size(), maxBytes)
				}
			}

			// Read: oldest first, no gaps, ending with the last write, and
			// every kept rotated file full.
			got, st := mustRead(t, path, Filter{})
			if st.Malformed != 0 || st.Files != want+1 {
				t.Errorf("stats %+v, want %d files and none malformed", st, want+1)
			}
			inCurrent := tt.writes - (tt.writes-1)/perFile*perFile
			if len(got) != want*perFile+inCurrent {
				t.Errorf("read %d entries, want %d", len(got), want*perFile+inCurrent)
			}
			first := tt.writes - len(got)
			for i, e := range got {
				if wantID := fmt.Sprintf("s-%d", 100+first+i); e.ID != wantID {
					t.Fatalf("entry %d = %s, want %s (ids %v)", i, e.ID, wantID, ids(got))
				}
			}
		})
	}
}

func names(path string, nums []int) []string {
	var out []string
	for _, n := range nums {
		out = append(out, rotatedName(path, n))
	}
	return out
}

func TestRotationRemovesExcessFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeFile(t, path+".9", "", 0o600) // left by a larger MaxFiles
	writeFile(t, path+".notes", "", 0o600)
	l, err := Open(path, Options{MaxBytes: 300, MaxFiles: 2, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 10 {
		mustWrite(t, l, ent("s", i))
	}
	if _, err := os.Stat(path + ".9"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("audit.jsonl.9 still there: %v", err)
	}
	if _, err := os.Stat(path + ".notes"); err != nil {
		t.Errorf("a file that is not a rotated log was touched: %v", err)
	}
}

// A rotation that cannot rename fails the write; once the obstacle is gone
// the next write rotates and nothing written before is lost or reordered.
func TestRotationFailureRetries(t *testing.T) {
	l, path := openLog(t, Options{MaxBytes: 300, MaxFiles: 1, SyncInterval: -1})
	// rename(2) of a file onto a non-empty directory fails, even for root.
	writeFile(t, filepath.Join(path+".1", "block"), "", 0o600)

	var written []string
	failed := 0
	for i := range 10 {
		e := ent("s", i)
		if err := l.Write(e); err != nil {
			failed++
			continue
		}
		written = append(written, e.ID)
	}
	if failed == 0 {
		t.Fatal("no write failed although rotation was blocked")
	}
	if err := os.RemoveAll(path + ".1"); err != nil {
		t.Fatal(err)
	}
	e := ent("s", 10)
	mustWrite(t, l, e)
	written = append(written, e.ID)
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Fatalf("no rotation after the retry: %v", err)
	}
	got, _ := mustRead(t, path, Filter{})
	if g, w := strings.Join(ids(got), " "), strings.Join(written, " "); g != w {
		t.Errorf("read %s\nwant %s", g, w)
	}
}

// A rotation that stopped half way (here: .1 moved to .2, path not yet to
// .1) is completed by the next one without dropping a file that should be
// kept.
func TestRotationFillsHole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeFile(t, path+".3", line(t, ent("a", 0))+"\n", 0o600)
	writeFile(t, path+".2", line(t, ent("b", 0))+"\n", 0o600)
	writeFile(t, path, line(t, ent("c", 0))+"\n", 0o600)
	l, err := Open(path, Options{MaxBytes: 300, MaxFiles: 3, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustWrite(t, l, ent("d", 0)) // rotates: c's file moves to the hole at .1
	got, _ := mustRead(t, path, Filter{})
	if g := strings.Join(ids(got), " "); g != "a-0 b-0 c-0 d-0" {
		t.Errorf("read %q, want \"a-0 b-0 c-0 d-0\"", g)
	}
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Errorf("no .1 after rotation: %v", err)
	}
}

// Fail closed on a real full disk: /dev/full fails every write with ENOSPC.
func TestWriteDevFull(t *testing.T) {
	before, err := os.Stat("/dev/full")
	if err != nil {
		t.Fatalf("this test needs /dev/full: %v", err)
	}
	link := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.Symlink("/dev/full", link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/dev/full", link} {
		t.Run(path, func(t *testing.T) {
			// A tiny MaxBytes: a device must never be rotated (renamed).
			l, err := Open(path, Options{MaxBytes: 1, SyncInterval: -1})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			for i := range 3 {
				err := l.Write(ent("s", i))
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("Write %d = %v, want ENOSPC", i, err)
				}
			}
			l.Close()
		})
	}
	after, err := os.Stat("/dev/full")
	if err != nil || after.Mode() != before.Mode() {
		t.Errorf("/dev/full changed: mode %v → %v (%v)", before.Mode(), after.Mode(), err)
	}
	if _, err := os.Lstat(link + ".1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the device link was rotated: %v", err)
	}
}

// A device that accepts writes is written to but never rotated: renaming
// /dev/null away would break the whole system.
func TestWriteDeviceNotRotated(t *testing.T) {
	link := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.Symlink("/dev/null", link); err != nil {
		t.Fatal(err)
	}
	l, err := Open(link, Options{MaxBytes: 1, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 3 {
		mustWrite(t, l, ent("s", i))
	}
	if _, err := os.Lstat(link + ".1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the device was rotated: %v", err)
	}
}

// fakeFile wraps the real file, failing writes in the ways a disk can.
type fakeFile struct {
	file
	short bool  // write the first half and report success: a short write
	err   error // write the first half and fail with err
}

func (f *fakeFile) Write(p []byte) (int, error) {
	n, _ := f.file.Write(p[:len(p)/2])
	if f.short {
		return n, nil
	}
	return n, f.err
}

func TestWritePartialFailure(t *testing.T) {
	tests := []struct {
		name string
		fake *fakeFile
		want error
	}{
		{"short write", &fakeFile{short: true}, io.ErrShortWrite},
		{"error mid-write", &fakeFile{err: syscall.EIO}, syscall.EIO},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, path := openLog(t, Options{SyncInterval: -1})
			mustWrite(t, l, ent("s", 0))

			l.mu.Lock()
			real := l.f
			tt.fake.file = real
			l.f = tt.fake
			l.mu.Unlock()
			if err := l.Write(ent("s", 1)); !errors.Is(err, tt.want) {
				t.Fatalf("Write = %v, want %v", err, tt.want)
			}

			l.mu.Lock()
			l.f = real
			l.mu.Unlock()
			mustWrite(t, l, ent("s", 2))

			// The fragment is lost, the entries around it are not.
			got, st := mustRead(t, path, Filter{})
			if g := strings.Join(ids(got), " "); g != "s-0 s-2" || st.Malformed != 1 {
				t.Errorf("read %q with %d malformed, want \"s-0 s-2\" with 1", g, st.Malformed)
			}
		})
	}
}

// A crash mid-write leaves a partial line; the next process's first entry
// must not be glued to it.
func TestOpenAfterCrashMidWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, l, ent("s", 0))
	mustWrite(t, l, ent("s", 1))
	l.Close()
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-20); err != nil {
		t.Fatal(err)
	}

	l, err = Open(path, Options{SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustWrite(t, l, ent("s", 2))
	got, stats := mustRead(t, path, Filter{})
	if g := strings.Join(ids(got), " "); g != "s-0 s-2" || stats.Malformed != 1 {
		t.Errorf("read %q with %d malformed, want \"s-0 s-2\" with 1", g, stats.Malformed)
	}
}

func TestWriteAfterClose(t *testing.T) {
	l, _ := openLog(t, Options{})
	mustWrite(t, l, ent("s", 0))
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Write(ent("s", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func TestWriteTooLarge(t *testing.T) {
	l, path := openLog(t, Options{SyncInterval: -1})
	e := ent("s", 0)
	e.Reason = strings.Repeat("x", MaxLineBytes)
	if err := l.Write(e); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Write = %v, want ErrTooLarge", err)
	}
	mustWrite(t, l, ent("s", 1))
	if got, _ := mustRead(t, path, Filter{}); len(got) != 1 || got[0].ID != "s-1" {
		t.Errorf("read %v, want only s-1", ids(got))
	}
}

func TestWriteUnencodable(t *testing.T) {
	l, path := openLog(t, Options{SyncInterval: -1})
	e := ent("s", 0)
	e.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // outside RFC 3339
	if err := l.Write(e); err == nil {
		t.Fatal("Write of an unencodable entry returned nil")
	}
	if got, _ := mustRead(t, path, Filter{}); len(got) != 0 {
		t.Errorf("read %v, want nothing", ids(got))
	}
}

// The log file removed (and its directory made impossible) behind the
// writer's back: the sync goroutine's check makes the next write reopen the
// path, fail while it cannot, and recover once it can.
func TestRemovedLogIsReopened(t *testing.T) {
	l, path := openLog(t, Options{SyncInterval: -1})
	dir := filepath.Dir(path)
	mustWrite(t, l, ent("s", 0))

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "", 0o600) // a file where the directory was
	l.checkPath()
	if err := l.Write(ent("s", 1)); err == nil {
		t.Fatal("Write succeeded with no way to create the log")
	}

	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, l, ent("s", 2))
	if got, _ := mustRead(t, path, Filter{}); len(got) != 1 || got[0].ID != "s-2" {
		t.Errorf("read %v, want s-2 in the recreated log", ids(got))
	}
	if got := perm(t, dir); got != 0o700 {
		t.Errorf("recreated dir mode %o, want 700", got)
	}
}

// syncOnce fsyncs and closes the files rotation retired, and clears dirty.
func TestSyncOnce(t *testing.T) {
	l, _ := openLog(t, Options{MaxBytes: 300, MaxFiles: 3, SyncInterval: time.Hour})
	for i := range 10 {
		mustWrite(t, l, ent("s", i))
	}
	l.mu.Lock()
	retired, dirty := len(l.retired), l.dirty
	l.mu.Unlock()
	if retired == 0 || !dirty {
		t.Fatalf("before: %d retired, dirty %v; want some and true", retired, dirty)
	}
	l.syncOnce()
	l.mu.Lock()
	retired, dirty = len(l.retired), l.dirty
	l.mu.Unlock()
	if retired != 0 || dirty {
		t.Errorf("after: %d retired, dirty %v; want 0 and false", retired, dirty)
	}
}

// BenchmarkWrite measures one entry of typical size, rotation included.
func BenchmarkWrite(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "audit.jsonl"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	e := ent("session-0123456789", 1)
	e.Reason = "arguments match the schema"
	b.ReportAllocs()
	for b.Loop() {
		e.Time = time.Time{}
		if err := l.Write(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteParallel is BenchmarkWrite from GOMAXPROCS goroutines.
func BenchmarkWriteParallel(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "audit.jsonl"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		e := ent("session-0123456789", 1)
		e.Reason = "arguments match the schema"
		for pb.Next() {
			e.Time = time.Time{}
			if err := l.Write(e); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
