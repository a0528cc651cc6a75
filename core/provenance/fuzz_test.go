package provenance

import "testing"

// FuzzExtract: no text makes Extract or Normalize panic; every URL
// Extract finds is normalised already (Normalize is idempotent on it), and
// once given it is given.
func FuzzExtract(f *testing.F) {
	for _, s := range []string{"see https://Example.com:443/a?b=c#d.", "[x](http://[::1]:80/p))", "https://", "http://a b", "https://%zz/", "https://a.example/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s := New()
		urls := Extract(text)
		s.GiveURLs(urls)
		for _, u := range urls {
			if n, ok := Normalize(u); !ok || n != u {
				t.Fatalf("Extract gave %q, which normalises to %q, %v", u, n, ok)
			}
			if !s.Given(u) {
				t.Fatalf("%q extracted and given, but not Given", u)
			}
		}
	})
}
