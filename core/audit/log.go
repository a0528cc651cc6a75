package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Defaults for Options.
const (
	DefaultMaxBytes     = 10 << 20    // Options.MaxBytes: 10 MiB
	DefaultMaxFiles     = 5           // Options.MaxFiles
	DefaultSyncInterval = time.Second // Options.SyncInterval
)

// MaxLineBytes is the largest entry, in bytes of JSON without its newline,
// that Write accepts and Read parses. Write refuses a larger entry rather than
// write a line the readers would have to skip.
const MaxLineBytes = 2 << 20

// Errors returned by Write.
var (
	// ErrClosed is returned by Write after Close.
	ErrClosed = errors.New("audit: log is closed")
	// ErrTooLarge is returned by Write for an entry longer than MaxLineBytes.
	ErrTooLarge = errors.New("audit: entry exceeds MaxLineBytes")
)

// Options configure a Log. The zero value selects every default.
type Options struct {
	// MaxBytes is the size the current file may reach: a write that would
	// make it larger rotates first. A single entry larger than MaxBytes is
	// still written, to a fresh file. Zero or less selects DefaultMaxBytes.
	MaxBytes int64
	// MaxFiles is how many rotated files are kept: path.1 (newest) to
	// path.MaxFiles (oldest). Zero or less selects DefaultMaxFiles.
	MaxFiles int
	// SyncInterval is how often a background goroutine fsyncs a file that
	// was written to since the last fsync, and checks that path still names
	// the open file. Zero selects DefaultSyncInterval; a negative value
	// disables both (the kernel's writeback then decides when data reaches
	// the disk, and only Close fsyncs).
	SyncInterval time.Duration
	// Logger receives the writer's own troubles that no Write call can
	// report: background fsync failures and a log file that was removed or
	// replaced under it. Nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// file is what Log needs of its open file. *os.File implements it; tests
// swap in failing implementations.
type file interface {
	io.Writer
	Sync() error
	Close() error
}

// Log is an open audit log. Its methods are safe for concurrent use.
type Log struct {
	path string
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	f       file        // nil after a failed rotation or a replaced file: the next Write reopens path
	info    fs.FileInfo // identity of f, to notice the file being removed or replaced
	regular bool        // f is a regular file: rotate it and fix its mode (never a device such as /dev/full)
	size    int64       // bytes in f
	torn    bool        // f does not end in '\n' (a failed write or a crash left part of a line)
	dirty   bool        // f was written since its last fsync
	retired []file      // rotated files still to be fsynced and closed by the sync goroutine
	dirSync bool        // the directory changed (rotation) since its last fsync
	closed  bool
	buf     bytes.Buffer  // reused for every entry; byte 0 is a '\n' used only when torn
	enc     *json.Encoder // writes into buf

	stop chan struct{} // closed by Close; nil when background fsync is disabled
	done chan struct{} // closed when the sync goroutine has returned
}

var _ io.Closer = (*Log)(nil)

// Open opens the audit log at path for appending, creating it (0600) and its
// directory (0700) if missing. An existing regular file with a wider mode is
// narrowed to 0600. A path that is not a regular file — a device such as
// /dev/null — is written to as is and never rotated.
func Open(path string, opts Options) (*Log, error) {
	opts = opts.withDefaults()
	l := &Log{path: path, opts: opts, log: opts.Logger}
	l.enc = json.NewEncoder(&l.buf)
	l.enc.SetEscapeHTML(false)
	if err := l.open(); err != nil {
		return nil, err
	}
	if opts.SyncInterval > 0 {
		l.stop = make(chan struct{})
		l.done = make(chan struct{})
		go l.syncLoop(opts.SyncInterval)
	}
	return l, nil
}

// open opens path and makes it the current file. The caller holds mu, or
// owns l exclusively.
func (l *Log) open() error {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return fmt.Errorf("audit: create log directory: %w", err)
	}
	// O_RDWR rather than O_WRONLY so the last byte can be checked below.
	// os.OpenFile adds O_CLOEXEC: plugins started later never inherit it.
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: open log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: open log: %w", err)
	}
	regular := st.Mode().IsRegular()
	torn := false
	if regular {
		if st.Mode().Perm() != 0o600 {
			if err := f.Chmod(0o600); err != nil {
				f.Close()
				return fmt.Errorf("audit: narrow log mode: %w", err)
			}
		}
		// A crash in the middle of a write leaves a partial last line. The
		// next entry must start on a line of its own, or the reader would
		// skip it together with the fragment.
		if st.Size() > 0 {
			var last [1]byte
			if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
				f.Close()
				return fmt.Errorf("audit: open log: %w", err)
			}
			torn = last[0] != '\n'
		}
	}
	l.f, l.info, l.regular, l.torn, l.dirty = f, st, regular, torn, false
	l.size = 0
	if regular {
		l.size = st.Size()
	}
	return nil
}

// Write appends e to the log as one line, in a single write(2). If e.Time is
// zero it is set to the current time in UTC; the stamp is taken under the
// log's lock, so such stamps never decrease from one line to the next.
//
// Write returns nil only once the whole line is in the file. Any other
// outcome — a closed log, a failed rotation, a short or failed write, an
// entry that cannot be encoded or exceeds MaxLineBytes — is an error, and the
// caller must treat the event as unaudited (the core refuses the request).
// A later Write retries whatever failed.
func (l *Log) Write(e *Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	l.buf.Reset()
	l.buf.WriteByte('\n')
	if err := l.enc.Encode(e); err != nil { // appends the line and its '\n'
		return fmt.Errorf("audit: encode entry: %w", err)
	}
	if l.buf.Len()-2 > MaxLineBytes {
		l.shrink()
		return ErrTooLarge
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			return err
		}
	}
	line := l.buf.Bytes()[1:]
	if l.regular && l.size > 0 && l.size+int64(len(line)) > l.opts.MaxBytes {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	if l.torn {
		line = l.buf.Bytes()
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	if n > 0 {
		l.dirty = true
		l.torn = line[n-1] != '\n'
	}
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	l.shrink()
	if err != nil {
		return fmt.Errorf("audit: write %s: %w", l.path, err)
	}
	return nil
}

// shrink drops a buffer grown by an unusually large entry.
func (l *Log) shrink() {
	if l.buf.Cap() > 64<<10 {
		l.buf = bytes.Buffer{}
	}
}

// rotate renames path.(N-1) to path.N … path to path.1 and opens a fresh
// path. The caller holds mu.
//
// Only the files below the first missing number move: with .1 missing,
// nothing but path does. So a retry after a rotation that stopped half way
// (.1 already moved to .2, path not yet to .1) completes it without pushing
// a file out early. If a rename fails the current file stays open and
// current, and the next Write tries again. If only the final open fails, f
// is nil and the next Write opens path.
func (l *Log) rotate() error {
	hole := l.opts.MaxFiles // no hole: path.N-1 replaces the oldest, path.N
	for k := 1; k < l.opts.MaxFiles; k++ {
		if _, err := os.Lstat(rotatedName(l.path, k)); errors.Is(err, fs.ErrNotExist) {
			hole = k
			break
		}
	}
	for i := hole - 1; i >= 1; i-- {
		if err := os.Rename(rotatedName(l.path, i), rotatedName(l.path, i+1)); err != nil {
			return fmt.Errorf("audit: rotate: %w", err)
		}
	}
	if err := os.Rename(l.path, rotatedName(l.path, 1)); err != nil {
		return fmt.Errorf("audit: rotate: %w", err)
	}
	l.dirSync = true
	// Nothing writes to the old file any more. Handing it to the sync
	// goroutine keeps an fsync of up to MaxBytes out of the write path.
	if l.stop != nil {
		l.retired = append(l.retired, l.f)
	} else if err := l.f.Close(); err != nil {
		l.log.Warn("audit: close rotated log", "path", l.path, "err", err)
	}
	l.f = nil

	// Files beyond MaxFiles: left by an earlier, larger MaxFiles. The rename
	// above already replaced path.MaxFiles.
	nums, err := rotatedNumbers(l.path)
	if err != nil {
		l.log.Warn("audit: list rotated logs", "path", l.path, "err", err)
	}
	for _, n := range nums {
		if n > l.opts.MaxFiles {
			if err := os.Remove(rotatedName(l.path, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				l.log.Warn("audit: remove old rotated log", "path", rotatedName(l.path, n), "err", err)
			}
		}
	}
	if err := l.open(); err != nil {
		return fmt.Errorf("audit: rotate: %w", err)
	}
	return nil
}

// Close stops the background fsync, fsyncs and closes the file. Write after
// Close returns ErrClosed; a second Close returns nil.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	if l.stop != nil {
		close(l.stop)
		<-l.done
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, f := range l.retired {
		errs = append(errs, f.Sync(), f.Close())
	}
	l.retired = nil
	if l.f != nil {
		errs = append(errs, l.f.Sync(), l.f.Close())
		l.f = nil
	}
	if l.dirSync {
		errs = append(errs, syncDir(filepath.Dir(l.path)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("audit: close: %w", err)
	}
	return nil
}

func (l *Log) syncLoop(interval time.Duration) {
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.syncOnce()
			l.checkPath()
		}
	}
}

// syncOnce fsyncs what was written since the last call. The fsyncs run
// outside mu so writers are never held up by the disk.
func (l *Log) syncOnce() {
	l.mu.Lock()
	f, dirty := l.f, l.dirty
	l.dirty = false
	retired := l.retired
	l.retired = nil
	dirSync := l.dirSync
	l.dirSync = false
	l.mu.Unlock()

	for _, r := range retired {
		if err := r.Sync(); err != nil {
			l.log.Error("audit: fsync rotated log", "path", l.path, "err", err)
		}
		r.Close()
	}
	if dirSync {
		if err := syncDir(filepath.Dir(l.path)); err != nil {
			l.log.Error("audit: fsync log directory", "path", l.path, "err", err)
		}
	}
	if dirty && f != nil {
		// Only this goroutine and Close (which waits for it) close files,
		// so f is still open; a rotation since only retired it.
		if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
			l.log.Error("audit: fsync log", "path", l.path, "err", err)
			l.mu.Lock()
			if l.f == f {
				l.dirty = true // try again next tick
			}
			l.mu.Unlock()
		}
	}
}

// checkPath notices a log file that was removed or replaced behind the
// writer's back. Writes to a removed file would succeed and be invisible to
// every reader, so the file is closed and the next Write reopens path (or
// fails, if it cannot).
func (l *Log) checkPath() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.f == nil {
		return
	}
	// Any failure to stat counts: readers cannot reach the file either. If
	// the cause is transient, reopening merely reopens the same file.
	st, err := os.Stat(l.path)
	if err == nil && os.SameFile(st, l.info) {
		return
	}
	l.log.Warn("audit: log file was removed or replaced; reopening", "path", l.path, "err", err)
	if err := l.f.Sync(); err != nil {
		l.log.Warn("audit: fsync replaced log", "path", l.path, "err", err)
	}
	l.f.Close()
	l.f = nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// rotatedName is path.n.
func rotatedName(path string, n int) string { return path + "." + strconv.Itoa(n) }
