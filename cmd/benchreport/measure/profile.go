package measure

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// CPUProfile is a CPU profile reduced to what the report needs: for every
// sampled stack, its function names (leaf first) and CPU time.
type CPUProfile struct {
	Raw      []byte // the gzipped pprof profile, for `go tool pprof`
	Total    time.Duration
	Requests int64 // requests answered while profiling, if the caller sets it: the per-request denominator
	samples  []stackSample
}

// PerRequest returns d divided by the profile's Requests, or 0.
func (p *CPUProfile) PerRequest(d time.Duration) time.Duration {
	if p.Requests <= 0 {
		return 0
	}
	return d / time.Duration(p.Requests)
}

type stackSample struct {
	funcs []string // leaf first
	cpu   time.Duration
}

// Profile runs work under the CPU profiler and returns the profile. It fails
// if a profile is already being taken (go test -cpuprofile).
func Profile(work func() error) (*CPUProfile, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, err
	}
	werr := work()
	pprof.StopCPUProfile()
	if werr != nil {
		return nil, werr
	}
	return ParseProfile(buf.Bytes())
}

// Share is a part of a profile's CPU time.
type Share struct {
	Name     string
	CPU      time.Duration
	Fraction float64 // of the profile's total
}

// Component names a cost by the functions whose presence anywhere in a
// stack attributes the sample to it. Components may overlap.
type Component struct {
	Name  string
	Match []string // substrings of fully qualified function names
}

// Inclusive returns, for each component, the CPU time of the samples whose
// stack contains one of its functions (cumulative time, as pprof's "cum").
func (p *CPUProfile) Inclusive(cs []Component) []Share {
	out := make([]Share, len(cs))
	for i, c := range cs {
		out[i].Name = c.Name
		for _, s := range p.samples {
			if s.matches(c.Match) {
				out[i].CPU += s.cpu
			}
		}
		out[i].Fraction = p.frac(out[i].CPU)
	}
	return out
}

// InclusiveAll returns the CPU time of the samples whose stack contains, for
// every one of sets, one of its functions: where a cost is reached from
// (runtime.newstack under a given goroutine's function, say).
func (p *CPUProfile) InclusiveAll(sets ...[]string) time.Duration {
	var d time.Duration
	for _, s := range p.samples {
		if !slices.ContainsFunc(sets, func(m []string) bool { return !s.matches(m) }) {
			d += s.cpu
		}
	}
	return d
}

// Partition attributes each sample to the first component it matches (or
// "other"), so the shares add up to the total.
func (p *CPUProfile) Partition(cs []Component) []Share {
	out := make([]Share, len(cs)+1)
	for i, c := range cs {
		out[i].Name = c.Name
	}
	out[len(cs)].Name = "other"
	for _, s := range p.samples {
		i := slices.IndexFunc(cs, func(c Component) bool { return s.matches(c.Match) })
		if i < 0 {
			i = len(cs)
		}
		out[i].CPU += s.cpu
	}
	for i := range out {
		out[i].Fraction = p.frac(out[i].CPU)
	}
	return out
}

// Top returns the n functions with the most CPU time of their own (flat:
// the leaf of the stack).
func (p *CPUProfile) Top(n int) []Share {
	m := map[string]time.Duration{}
	for _, s := range p.samples {
		if len(s.funcs) > 0 {
			m[s.funcs[0]] += s.cpu
		}
	}
	out := make([]Share, 0, len(m))
	for f, d := range m {
		out = append(out, Share{Name: f, CPU: d, Fraction: p.frac(d)})
	}
	slices.SortFunc(out, func(a, b Share) int {
		if a.CPU != b.CPU {
			return int(b.CPU - a.CPU)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out[:min(n, len(out))]
}

func (p *CPUProfile) frac(d time.Duration) float64 {
	if p.Total == 0 {
		return 0
	}
	return float64(d) / float64(p.Total)
}

func (s *stackSample) matches(subs []string) bool {
	for _, f := range s.funcs {
		for _, m := range subs {
			if strings.Contains(f, m) {
				return true
			}
		}
	}
	return false
}

// ParseProfile decodes a gzipped pprof CPU profile, as runtime/pprof writes
// it. It reads only what the report uses: samples, locations, functions and
// the string table (profile.proto field numbers below).
func ParseProfile(raw []byte) (*CPUProfile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	type sample struct {
		locs   []uint64
		values []int64
	}
	var (
		samples   []sample
		locFuncs  = map[uint64][]uint64{} // location id → function ids, leaf (innermost inline) first
		funcNames = map[uint64]int64{}    // function id → string index
		strs      []string
		nTypes    int
	)
	err = fields(data, func(num int, wire int, v uint64, b []byte) error {
		switch num {
		case 1: // sample_type
			nTypes++
		case 2: // sample
			var s sample
			err := fields(b, func(num, wire int, v uint64, b []byte) error {
				switch num {
				case 1:
					s.locs = appendUints(s.locs, wire, v, b)
				case 2:
					for _, u := range appendUints(nil, wire, v, b) {
						s.values = append(s.values, int64(u))
					}
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4: // location
			var id uint64
			var fns []uint64
			err := fields(b, func(num, wire int, v uint64, b []byte) error {
				switch num {
				case 1:
					id = v
				case 4: // line
					return fields(b, func(num, wire int, v uint64, _ []byte) error {
						if num == 1 {
							fns = append(fns, v)
						}
						return nil
					})
				}
				return nil
			})
			locFuncs[id] = fns
			return err
		case 5: // function
			var id uint64
			var name int64
			err := fields(b, func(num, wire int, v uint64, _ []byte) error {
				switch num {
				case 1:
					id = v
				case 2:
					name = int64(v)
				}
				return nil
			})
			funcNames[id] = name
			return err
		case 6: // string_table
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	p := &CPUProfile{Raw: raw}
	for _, s := range samples {
		if len(s.values) == 0 {
			continue
		}
		cpu := time.Duration(s.values[len(s.values)-1]) // [samples/count, cpu/nanoseconds]
		var funcs []string
		for _, l := range s.locs {
			for _, f := range locFuncs[l] {
				if i := funcNames[f]; i >= 0 && int(i) < len(strs) {
					funcs = append(funcs, strs[i])
				}
			}
		}
		p.samples = append(p.samples, stackSample{funcs: funcs, cpu: cpu})
		p.Total += cpu
	}
	return p, nil
}

// fields calls fn for each field of a protobuf message: varints as v,
// length-delimited fields as b.
func fields(data []byte, fn func(num, wire int, v uint64, b []byte) error) error {
	for len(data) > 0 {
		key, n := binary.Uvarint(data)
		if n <= 0 {
			return errors.New("bad field key")
		}
		data = data[n:]
		num, wire := int(key>>3), int(key&7)
		var v uint64
		var b []byte
		switch wire {
		case 0:
			v, n = binary.Uvarint(data)
			if n <= 0 {
				return errors.New("bad varint")
			}
			data = data[n:]
		case 1:
			if len(data) < 8 {
				return errors.New("short fixed64")
			}
			v, data = binary.LittleEndian.Uint64(data), data[8:]
		case 2:
			l, n := binary.Uvarint(data)
			if n <= 0 || uint64(len(data)-n) < l {
				return errors.New("bad length")
			}
			b, data = data[n:n+int(l)], data[n+int(l):]
		case 5:
			if len(data) < 4 {
				return errors.New("short fixed32")
			}
			v, data = uint64(binary.LittleEndian.Uint32(data)), data[4:]
		default:
			return fmt.Errorf("unsupported wire type %d", wire)
		}
		if err := fn(num, wire, v, b); err != nil {
			return err
		}
	}
	return nil
}

// appendUints appends a repeated uint64 field, packed (wire type 2) or not.
func appendUints(dst []uint64, wire int, v uint64, b []byte) []uint64 {
	if wire != 2 {
		return append(dst, v)
	}
	for len(b) > 0 {
		u, n := binary.Uvarint(b)
		if n <= 0 {
			break
		}
		dst, b = append(dst, u), b[n:]
	}
	return dst
}
