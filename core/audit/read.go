package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Filter selects entries. The zero Filter selects every entry.
type Filter struct {
	Session     string // exact match when set
	Correlation string // exact match when set
	Group       string // exact match when set
	// Outcome is an exact match when set, except OutcomeError ("error"),
	// which matches every failed entry (Entry.Failed): rejected ones too.
	Outcome string
	// Last keeps only the last Last matching entries; zero or less keeps
	// them all. Match ignores it.
	Last int
}

// Match reports whether e passes every condition of f except Last.
func (f Filter) Match(e *Entry) bool {
	switch {
	case f.Session != "" && e.Session != f.Session,
		f.Correlation != "" && e.Correlation != f.Correlation,
		f.Group != "" && e.Group != f.Group:
		return false
	}
	switch f.Outcome {
	case "":
		return true
	case OutcomeError:
		return e.Failed()
	default:
		return e.Outcome == f.Outcome
	}
}

// Stats describes what ReadStats went through.
type Stats struct {
	Files     int // files read, rotated ones included
	Entries   int // well-formed entries, matching or not
	Malformed int // lines skipped: not JSON, not an entry, too long, or cut short by a crash
}

// Read returns the entries of the log at path that match f, oldest first:
// the rotated files path.N … path.1, then path itself. Malformed lines are
// skipped (ReadStats counts them); a missing log is empty, not an error.
//
// Read takes no lock and works while a Log writes. It sees every entry
// written before it was called; one being written at that moment may be
// counted as malformed. A rotation during the call can only lose entries
// from the oldest end, never from the middle.
func Read(path string, f Filter) ([]Entry, error) {
	entries, _, err := ReadStats(path, f)
	return entries, err
}

// ReadStats is Read, also reporting how many files, entries and malformed
// lines it went through.
func ReadStats(path string, f Filter) ([]Entry, Stats, error) {
	set, err := openSet(path)
	if err != nil {
		return nil, Stats{}, err
	}
	defer set.close()
	st := Stats{Files: len(set.files)}
	keep := newCollector(f.Last)
	for _, file := range set.files {
		err := scanAll(file, &st, func(e *Entry) error {
			if f.Match(e) {
				keep.add(*e)
			}
			return nil
		})
		if err != nil {
			return nil, st, fmt.Errorf("audit: read %s: %w", file.Name(), err)
		}
	}
	return keep.entries(), st, nil
}

// scanAll calls fn for every well-formed entry of a file that is not being
// written any more, or whose unfinished last line may be counted as
// malformed.
func scanAll(r io.Reader, st *Stats, fn func(*Entry) error) error {
	lr := newLineReader(r)
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := parseInto(line, st, fn); err != nil {
			return err
		}
	}
	return lr.finish(st, fn)
}

// parseInto parses one line and hands a well-formed entry to fn. Blank lines
// are ignored; anything else that is not an entry is counted as malformed.
func parseInto(line []byte, st *Stats, fn func(*Entry) error) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	var e Entry
	// Every line a Log writes has a timestamp; "{}" or "null" is not one.
	if err := json.Unmarshal(line, &e); err != nil || e.Time.IsZero() {
		st.Malformed++
		return nil
	}
	st.Entries++
	return fn(&e)
}

// lineReader splits a file into lines without limiting its own buffer to
// the longest line: lines longer than MaxLineBytes are skipped and counted
// as malformed, where bufio.Scanner would stop at them for good. At the end
// of the data it keeps an unterminated tail, so a follower can call next
// again once the file has grown.
type lineReader struct {
	br      *bufio.Reader
	partial []byte // an unterminated line read so far
	skip    bool   // the current line is too long; discard through its '\n'
	long    int    // lines skipped for length
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next complete line without its '\n', or io.EOF when no
// complete line is available. The line is valid until the next call.
func (lr *lineReader) next() ([]byte, error) {
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if lr.skip {
			if err == nil {
				lr.skip = false
				continue
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			return nil, err
		}
		switch {
		case err == nil && len(lr.partial) == 0:
			return chunk[:len(chunk)-1], nil // the common case: no copy
		case err == nil:
			lr.partial = append(lr.partial, chunk...)
			line := lr.partial[:len(lr.partial)-1]
			lr.partial = lr.partial[:0]
			if len(line) > MaxLineBytes {
				lr.long++
				continue
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull), errors.Is(err, io.EOF):
			lr.partial = append(lr.partial, chunk...)
			if len(lr.partial) > MaxLineBytes {
				lr.partial = lr.partial[:0]
				lr.skip = true
				lr.long++
			}
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
		default:
			return nil, err
		}
	}
}

// finish ends the file: an unterminated last line is an entry if it parses
// (only its '\n' was lost), else a fragment counted as malformed. It also
// adds the lines skipped for length to st.Malformed.
func (lr *lineReader) finish(st *Stats, fn func(*Entry) error) error {
	st.Malformed += lr.long
	lr.long = 0
	tail := lr.partial
	lr.partial, lr.skip = nil, false
	if len(tail) == 0 {
		return nil
	}
	return parseInto(tail, st, fn)
}

// reset forgets everything buffered, for a file truncated in place.
func (lr *lineReader) reset(r io.Reader) {
	lr.br.Reset(r)
	lr.partial, lr.skip = lr.partial[:0], false
}

// collector keeps every entry, or only the last n in a ring.
type collector struct {
	n    int
	buf  []Entry
	next int // with a full ring: the oldest entry, overwritten next
}

func newCollector(last int) *collector { return &collector{n: max(last, 0)} }

func (c *collector) add(e Entry) {
	if c.n == 0 || len(c.buf) < c.n {
		c.buf = append(c.buf, e) // grows as needed: a huge Last costs nothing up front
		return
	}
	c.buf[c.next] = e
	c.next = (c.next + 1) % c.n
}

// entries returns what was kept, oldest first.
func (c *collector) entries() []Entry {
	if c.next == 0 {
		return c.buf
	}
	return append(c.buf[c.next:], c.buf[:c.next]...)
}

// fileSet is the log's files, open, oldest first: path.N … path.1, path.
type fileSet struct {
	files []*os.File
	infos []fs.FileInfo
	cur   int // index of path itself, or -1 if it did not exist
}

// openSet opens the current file first and then path.1, path.2 … so that a
// rotation running meanwhile can only make it open a file twice (the
// duplicate is dropped by identity) or miss the oldest ones, never skip one
// in the middle.
func openSet(path string) (*fileSet, error) {
	nums, err := rotatedNumbers(path)
	if err != nil {
		return nil, err
	}
	set := &fileSet{cur: -1}
	names := []string{path}
	for _, n := range nums {
		names = append(names, rotatedName(path, n))
	}
	for i, name := range names {
		f, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			set.close()
			return nil, fmt.Errorf("audit: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			set.close()
			return nil, fmt.Errorf("audit: %w", err)
		}
		if st.IsDir() && i == 0 {
			f.Close()
			set.close()
			return nil, fmt.Errorf("audit: %s is a directory", name)
		}
		if set.index(st) >= 0 || st.IsDir() {
			f.Close()
			continue
		}
		if i == 0 {
			set.cur = 0
		}
		set.files = append(set.files, f)
		set.infos = append(set.infos, st)
	}
	slices.Reverse(set.files)
	slices.Reverse(set.infos)
	if set.cur == 0 {
		set.cur = len(set.files) - 1
	}
	return set, nil
}

// index returns the position of the file st describes, or -1.
func (s *fileSet) index(st fs.FileInfo) int {
	return slices.IndexFunc(s.infos, func(fi fs.FileInfo) bool { return os.SameFile(fi, st) })
}

// close closes every file except the one at keep (-1 for none).
func (s *fileSet) close() { s.closeExcept(-1) }

func (s *fileSet) closeExcept(keep int) {
	for i, f := range s.files {
		if i != keep {
			f.Close()
		}
	}
}

// rotatedNumbers returns the n of every path.n in path's directory,
// ascending. Only canonical decimal suffixes count: path.01 and path.1.gz
// are not the log's.
func rotatedNumbers(path string) ([]int, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var nums []int
	for _, e := range ents {
		suffix, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(suffix)
		if err != nil || n < 1 || strconv.Itoa(n) != suffix {
			continue
		}
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums, nil
}
