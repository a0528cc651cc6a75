package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// pollInterval is how often Follow looks for new lines and for rotation.
const pollInterval = 200 * time.Millisecond

// Follow calls fn, in order, for every entry matching f (Last aside) that is
// appended to the log at path after the call; with f.Last > 0 it first calls
// fn for the last f.Last matching entries already there, rotated files
// included. Like tail -F it polls, survives rotation (a new file at path, or
// the file shrinking), and waits for a missing log to appear. After a
// rotation it first reads the rotated files written since the one it was
// following, so entries are not lost unless more than MaxFiles rotations
// happen within one poll. As with tail -F, a file truncated in place is only
// noticed if it is shorter than what was read when Follow looks; Log never
// truncates, it renames.
//
// Malformed lines are skipped. A line still being written is held back
// until its newline arrives. Follow returns ctx.Err() once ctx is done, fn's
// error if fn fails, or an error reading the files; never nil.
func Follow(ctx context.Context, path string, f Filter, fn func(Entry) error) error {
	t := &tailer{ctx: ctx, path: path, filter: f, fn: fn}
	defer t.close()
	if err := t.start(); err != nil {
		return err
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if err := t.poll(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// tailer is the state of one Follow.
type tailer struct {
	ctx    context.Context
	path   string
	filter Filter
	fn     func(Entry) error
	stats  Stats // malformed lines are counted but not reported

	file *os.File    // the file being followed; nil while path is missing
	info fs.FileInfo // the newest file read, or being read; nil if none yet
	cr   countingReader
	lr   *lineReader
}

// countingReader counts the bytes read from the followed file, to notice
// the file shrinking under it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// start positions the tailer: at the end of the current file, or, with
// f.Last, after emitting the last entries already logged.
func (t *tailer) start() error {
	set, err := openSet(t.path)
	if err != nil {
		return err
	}
	keep := -1
	defer func() { set.closeExcept(keep) }()

	if t.filter.Last <= 0 {
		switch {
		case set.cur >= 0:
			keep = set.cur
			return t.adoptAtEnd(set.files[set.cur], set.infos[set.cur])
		case len(set.files) > 0:
			// The current file is missing (a rotation is half done): all
			// that comes next is newer than the newest rotated file.
			t.info = set.infos[len(set.files)-1]
		}
		return nil
	}

	last := newCollector(t.filter.Last)
	collect := func(e *Entry) error {
		if t.filter.Match(e) {
			last.add(*e)
		}
		return nil
	}
	for i, f := range set.files {
		if i == set.cur {
			keep = i
			t.adopt(f, set.infos[i], 0)
			if err := t.drain(collect); err != nil {
				return err
			}
			break
		}
		if err := scanAll(f, &t.stats, collect); err != nil {
			return fmt.Errorf("audit: follow %s: %w", f.Name(), err)
		}
		t.info = set.infos[i]
	}
	for _, e := range last.entries() {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		if err := t.fn(e); err != nil {
			return err
		}
	}
	return nil
}

// adopt makes f the followed file, read from offset off.
func (t *tailer) adopt(f *os.File, info fs.FileInfo, off int64) {
	t.file, t.info = f, info
	t.cr = countingReader{r: f, n: off}
	if t.lr == nil {
		t.lr = newLineReader(&t.cr)
	} else {
		t.lr.reset(&t.cr)
	}
}

// adoptAtEnd follows f from its end. If the end is inside a line (being
// written right now) the rest of that line is skipped, not misread.
func (t *tailer) adoptAtEnd(f *os.File, info fs.FileInfo) error {
	size := info.Size()
	if _, err := f.Seek(size, io.SeekStart); err != nil {
		return fmt.Errorf("audit: follow %s: %w", t.path, err)
	}
	t.adopt(f, info, size)
	if size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil {
			return fmt.Errorf("audit: follow %s: %w", t.path, err)
		}
		t.lr.skip = last[0] != '\n'
	}
	return nil
}

// emit hands a matching entry to fn.
func (t *tailer) emit(e *Entry) error {
	if !t.filter.Match(e) {
		return nil
	}
	if err := t.ctx.Err(); err != nil {
		return err
	}
	return t.fn(*e)
}

// drain passes every complete line of the followed file to fn.
func (t *tailer) drain(fn func(*Entry) error) error {
	for {
		line, err := t.lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: follow %s: %w", t.path, err)
		}
		if err := parseInto(line, &t.stats, fn); err != nil {
			return err
		}
	}
}

// poll emits what was appended since the last poll and follows the log to
// a new file if it rotated.
func (t *tailer) poll() error {
	// Each turn follows one rotation observed during this poll; the bound
	// only keeps a log rotating without pause from holding Follow here.
	for range 64 {
		if t.file != nil {
			if err := t.drain(t.emit); err != nil {
				return err
			}
		}
		st, err := os.Stat(t.path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed, or mid-rotation: wait for the new file
		}
		if err != nil {
			return fmt.Errorf("audit: follow: %w", err)
		}
		if t.file != nil && os.SameFile(st, t.info) {
			if st.Size() >= t.cr.n {
				return nil
			}
			// Truncated in place: start over from its beginning.
			if _, err := t.file.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("audit: follow %s: %w", t.path, err)
			}
			t.adopt(t.file, st, 0)
			continue
		}
		// path names another file: the log rotated, or appeared.
		if t.file != nil {
			// Lines written between the drain above and the rotation.
			if err := t.drain(t.emit); err != nil {
				return err
			}
			if err := t.lr.finish(&t.stats, t.emit); err != nil {
				return err
			}
			if st, err := t.file.Stat(); err == nil {
				t.info = st // the same file, with its final modification time
			}
			t.file.Close()
			t.file = nil
		}
		if err := t.catchUp(); err != nil {
			return err
		}
		if t.file == nil {
			return nil
		}
	}
	return nil
}

// catchUp reads the rotated files newer than t.info, then adopts the
// current file from its beginning.
func (t *tailer) catchUp() error {
	set, err := openSet(t.path)
	if err != nil {
		return err
	}
	keep := -1
	defer func() { set.closeExcept(keep) }()

	newer := func(int) bool { return true } // nothing was read yet: all is new
	if t.info != nil {
		if i := set.index(t.info); i >= 0 {
			newer = func(k int) bool { return k > i }
		} else {
			// The file we read is gone: deleted by hand, or rotated out
			// of the kept range by a burst. Only files modified after its
			// last write can be newer; replaying older ones would repeat
			// entries already emitted.
			prev := t.info.ModTime()
			newer = func(k int) bool { return k == set.cur || set.infos[k].ModTime().After(prev) }
		}
	}
	for i, f := range set.files {
		if !newer(i) {
			continue
		}
		if i == set.cur {
			keep = i
			t.adopt(f, set.infos[i], 0)
			return nil
		}
		if err := scanAll(f, &t.stats, t.emit); err != nil {
			return fmt.Errorf("audit: follow %s: %w", f.Name(), err)
		}
		t.info = set.infos[i]
	}
	return nil
}

func (t *tailer) close() {
	if t.file != nil {
		t.file.Close()
	}
}
