package sanitize

import "strings"

// Trigger bits are rule indexes: trigger sets bit i when rules[i] might match.
const (
	tPEM = 1 << iota
	tURL
	tAuthorization
	tBearer
	tBasic
	tAnthropic
	tOpenAI
	tGitHub
	tSlack
	tAWS
	tStripe
	tGoogle
	tJWT
	tAssignment
)

// Byte flags trigger collects from every byte.
const (
	fSep = 1 << iota // ':' or '=': an assignment or header could follow
	fAt              // '@': a URL could hold credentials
)

var byteFlags = func() (t [256]uint8) {
	t[':'], t['='], t['@'] = fSep, fSep, fAt
	return t
}()

// bigrams is a bitset of the byte pairs that begin the literal part of some
// rule ("sk", "gh", "--", "to"/"TO"…); trigger looks closer only at those.
// It must list the first two bytes of every case in trigger's switch.
var bigrams = func() (t [1 << 16 / 64]uint64) {
	add := func(first, second string) {
		for i := 0; i < len(first); i++ {
			for j := 0; j < len(second); j++ {
				k := uint(first[i])<<8 | uint(second[j])
				t[k/64] |= 1 << (k % 64)
			}
		}
	}
	add(":", "/")       // ://
	add("-", "-")       // -----BEGIN
	add("aA", "uUpP")   // authorization, api_key apikey api-key
	add("A", "KSI")     // AKIA ASIA AIza
	add("B", "e")       // Bearer
	add("bB", "aA")     // basic
	add("pP", "aAwWrR") // password passwd, pwd, private_key
	add("sS", "eE")     // secret
	add("s", "k")       // sk- sk_live_
	add("tT", "oO")     // token
	add("r", "k")       // rk_live_
	add("g", "hi")      // ghp_… github_pat_
	add("x", "oa")      // xoxb- xapp-
	add("e", "y")       // eyJ
	return t
}()

// trigger is the prefilter: one pass over s that reports, as a bit per rule,
// which rules could match because s holds that rule's literal part (sk-,
// AKIA, -----BEGIN , a key name and a ':' or '='…). Most strings yield 0 and
// are never given to a regexp. It must never miss: if rules[i] matches s, bit
// i is set (FuzzRules checks this).
func trigger(s string) uint32 {
	var m uint32
	var flags uint8
	var scheme, auth, assign bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		flags |= byteFlags[c]
		if i+1 == len(s) {
			break
		}
		if k := uint(c)<<8 | uint(s[i+1]); bigrams[k/64]&(1<<(k%64)) == 0 {
			continue
		}
		rest := s[i+1:]
		switch c {
		case ':':
			if strings.HasPrefix(rest, "//") {
				scheme = true
			}
		case '-':
			if strings.HasPrefix(rest, "----BEGIN ") {
				m |= tPEM
			}
		case 'a', 'A':
			if hasPrefixFold(rest, "uthorization") {
				auth = true
			} else if hasPrefixFold(rest, "pi_key") || hasPrefixFold(rest, "pikey") || hasPrefixFold(rest, "pi-key") {
				assign = true
			}
			if c == 'A' {
				if strings.HasPrefix(rest, "KIA") || strings.HasPrefix(rest, "SIA") {
					m |= tAWS
				} else if strings.HasPrefix(rest, "Iza") {
					m |= tGoogle
				}
			}
		case 'b', 'B':
			if c == 'B' && strings.HasPrefix(rest, "earer") {
				m |= tBearer
			}
			if hasPrefixFold(rest, "asic") {
				m |= tBasic
			}
		case 'p', 'P':
			if hasPrefixFold(rest, "assw") || hasPrefixFold(rest, "wd") ||
				hasPrefixFold(rest, "rivate_key") || hasPrefixFold(rest, "rivate-key") {
				assign = true
			}
		case 's', 'S':
			if hasPrefixFold(rest, "ecret") {
				assign = true
			}
			if c == 's' {
				if strings.HasPrefix(rest, "k-") {
					m |= tAnthropic | tOpenAI
				} else if strings.HasPrefix(rest, "k_live_") {
					m |= tStripe
				}
			}
		case 't', 'T':
			if hasPrefixFold(rest, "oken") {
				assign = true
			}
		case 'r':
			if strings.HasPrefix(rest, "k_live_") {
				m |= tStripe
			}
		case 'g':
			if len(rest) >= 3 && rest[0] == 'h' && rest[2] == '_' && strings.IndexByte("pousr", rest[1]) >= 0 ||
				strings.HasPrefix(rest, "ithub_pat_") {
				m |= tGitHub
			}
		case 'x':
			if strings.HasPrefix(rest, "ox") || strings.HasPrefix(rest, "app-") {
				m |= tSlack
			}
		case 'e':
			if strings.HasPrefix(rest, "yJ") {
				m |= tJWT
			}
		}
	}
	if flags&fSep != 0 {
		if auth {
			m |= tAuthorization
		}
		if assign {
			m |= tAssignment
		}
	}
	if scheme && flags&fAt != 0 {
		m |= tURL
	}
	return m
}
