package web

import (
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden Markdown in testdata/")

// TestExtractGolden converts the saved pages in testdata (a news article,
// a documentation page, a page full of scripts and trackers) and compares
// the Markdown with the checked-in golden files (go test -run
// TestExtractGolden -update rewrites them; read the diff).
func TestExtractGolden(t *testing.T) {
	cases := []struct {
		file, url, title string
		want, dropped    []string // what the Markdown must keep, and what it must not
	}{
		{"news.html", "https://gazette.example/news/local/cycling-network", "City council approves new cycling network after two-year debate",
			[]string{"nine votes to four", "## Who pays", "councillor Dana Whitfield", "1. Detailed designs", "(https://riverside.example.gov/cycling)"},
			[]string{"Subscribe from", "Most read", "cookies", "gtag", "All rights reserved"}},
		{"docs.html", "https://hoplite.example/en/3.2/guide/retries.html", "Hoplite HTTP client 3.2 documentation", // readability's pick of the <title>
			[]string{"# Configuring retries", "```", "Retry(total=5, backoff=0.5)", "| `total`    | `3`", "`Retry-After`", "(https://hoplite.example/en/3.2/api/retry.html#hoplite.Retry)"},
			[]string{"Search docs", "Installation", "Built with", "SphinxRtdTheme", "¶"}},
		{"trackers.html", "https://goodplate.example/weeknight-dinners", "10 easy weeknight dinners (the lentil one is our favourite)",
			[]string{"Red lentil dal", "250 g of red lentils", "Sheet-pan gnocchi", "Egg fried rice"},
			[]string{"googletagmanager", "fbq", "facebook", "847 partners", "hotjar", "pixel.tracker", "adnetwork", "This one trick"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(tc.url)
			title, md, err := Extract(raw, u)
			if err != nil {
				t.Fatal(err)
			}
			if title != tc.title {
				t.Errorf("title %q, want %q", title, tc.title)
			}
			for _, w := range tc.want {
				if !strings.Contains(md, w) {
					t.Errorf("the Markdown lost %q", w)
				}
			}
			for _, d := range tc.dropped {
				if strings.Contains(md, d) {
					t.Errorf("the Markdown keeps %q, which is not the page's content", d)
				}
			}
			golden := filepath.Join("testdata", strings.TrimSuffix(tc.file, ".html")+".md")
			if *update {
				if err := os.WriteFile(golden, []byte(md+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if string(want) != md+"\n" {
				t.Errorf("%s differs from the golden file %s:\n%s", tc.file, golden, md)
			}
		})
	}
}
