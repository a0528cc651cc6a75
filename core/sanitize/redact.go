package sanitize

import (
	"regexp"
	"slices"
	"strings"
)

// span is a secret found in a string: s[start:end], of the given kinds.
type span struct {
	start, end int
	kinds      kindSet
}

// maxPasses bounds the redaction passes over one string. Each pass removes
// every secret the rules see; a further pass makes sure the result holds
// nothing they see either (a redaction can change what surrounds another
// secret). One pass redacts, the next confirms; more are for contrived input.
const maxPasses = 4

// redact is String without the slice of kind names: the engine under String
// and Value. Clean strings (the common case) cost one trigger pass and no
// allocation.
func redact(s string) (string, kindSet) { return redactWith(s, matchRegexp) }

// matcher runs an anchored rule pattern at the start of s and returns the
// submatch indexes, as regexp.FindStringSubmatchIndex does.
type matcher func(re *regexp.Regexp, s string) []int

// matchRegexp is the matcher of String and Value.
func matchRegexp(re *regexp.Regexp, s string) []int { return re.FindStringSubmatchIndex(s) }

// redactWith is redact with the matcher given: the linearity test passes
// one that counts the bytes the regexp engine reads (a deterministic
// measure of work, where timings on a busy machine are not).
func redactWith(s string, match matcher) (string, kindSet) {
	m := trigger(s)
	if m == 0 {
		return s, 0
	}
	orig := s
	var kinds kindSet
	for range maxPasses {
		out, ks := redactPass(s, m, match)
		if ks == 0 {
			if s == orig {
				return orig, 0
			}
			return s, kinds
		}
		kinds |= ks
		s = out
		if m = trigger(s); m == 0 {
			return s, kinds
		}
	}
	// Still finding secrets after maxPasses: fail closed.
	return Placeholder, kinds
}

// redactPass runs the rules announced by m over s once, matching with
// match, and replaces the union of the secrets they find. Because spans
// from different rules are merged rather than matched in one alternation,
// no rule can hide another's secret by matching part of it first. It
// reports the kinds it replaced; 0 when it changed nothing.
func redactPass(s string, m uint32, match matcher) (string, kindSet) {
	var spans []span
	for i := range rules {
		if m&(1<<i) != 0 {
			spans = rules[i].find(s, spans, match)
		}
	}
	if len(spans) == 0 {
		return s, 0
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	// Merge overlapping and touching spans.
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp.start <= last.end {
			last.end = max(last.end, sp.end)
			last.kinds |= sp.kinds
			continue
		}
		merged = append(merged, sp)
	}
	var b strings.Builder
	b.Grow(len(s))
	var kinds kindSet
	prev := 0
	for _, sp := range merged {
		if s[sp.start:sp.end] == Placeholder {
			continue // already redacted: leave it, do not count it
		}
		b.WriteString(s[prev:sp.start])
		b.WriteString(Placeholder)
		prev = sp.end
		kinds |= sp.kinds
	}
	if kinds == 0 {
		return s, 0
	}
	b.WriteString(s[prev:])
	return b.String(), kinds
}

// find appends the secrets r finds in s to spans, matching with match. It
// tries the anchored pattern at every candidate position whose left context
// fits, except, unless the rule says inside, those within a secret it has
// found. Unlike an unanchored FindAll it does try candidates inside the
// rest of an earlier match, and after a match whose secret fails the rule's
// check it goes on from the next byte: neither can hide a secret. Each byte
// is scanned by a bounded number of attempts, so the time stays linear in
// len(s).
func (r *rule) find(s string, spans []span, match matcher) []span {
	for i := r.starts.next(s, 0, r.after); i >= 0; i = r.starts.next(s, i+1, r.after) {
		if r.before != nil && !r.before(s, i) {
			continue
		}
		loc := match(r.re, s[i:])
		if loc == nil {
			continue
		}
		g := r.group(loc)
		start, end := i+loc[2*g], i+loc[2*g+1]
		if start >= end || r.check != nil && !r.check(s[start:end]) {
			continue
		}
		spans = append(spans, span{start: start, end: end, kinds: 1 << r.kind})
		if !r.inside {
			i = end - 1
		}
	}
	return spans
}

// group returns the first of r.groups that took part in the match loc.
func (r *rule) group(loc []int) int {
	for _, g := range r.groups {
		if loc[2*g] >= 0 {
			return g
		}
	}
	return 0
}
