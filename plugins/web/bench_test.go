package web

import (
	"fmt"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bigPage is an HTML page of about size bytes: an article of many
// paragraphs, with a menu, scripts, ads and a footer around it.
func bigPage(size int) []byte {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><title>A long read | Example Times</title><script>var tracker = 1;</script></head><body>`)
	b.WriteString(`<header><nav><a href="/">Home</a> <a href="/news">News</a> <a href="/sport">Sport</a></nav></header><main><article><h1>A long read</h1>`)
	for i := 0; b.Len() < size-2000; i++ {
		if i%10 == 0 {
			fmt.Fprintf(&b, `<h2>Part %d</h2>`, i/10+1)
		}
		fmt.Fprintf(&b, `<p>Paragraph %d of the article: a sentence of ordinary prose, with <a href="/link/%d">a link</a>, some <em>emphasis</em> and enough words that the readability port counts it as content, which it is.</p>`, i, i)
		if i%25 == 0 {
			b.WriteString(`<div class="ad"><script>ads.push(1)</script>Advertisement</div>`)
		}
	}
	b.WriteString(`</article></main><footer>© Example Times</footer></body></html>`)
	return []byte(b.String())
}

// BenchmarkFetchExtract is web_fetch of a 1 MiB HTML page from a local
// server: the request, the bounded read, readability and the Markdown
// conversion (make bench; time, allocated bytes per fetch, and the peak of
// the live heap over the fetches above the heap before them).
func BenchmarkFetchExtract(b *testing.B) {
	body := bigPage(1 << 20)
	_, addr := server(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(body)
	})
	hd := New(Options{Dial: directDial})
	if err := hd.Init(b.Context(), map[string]any{"allow_addresses": []any{addr}}, nil); err != nil {
		b.Fatal(err)
	}
	args := map[string]any{"url": "http://" + addr + "/", "max_chars": num(MaxMaxChars)}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	// The peak of the live heap while fetching, sampled: what a fetch
	// costs in memory at once, beside what it allocates in all (B/op).
	runtime.GC()
	base := heapLive()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if h := heapLive(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for b.Loop() {
		r, err := call(hd, "main", "web_fetch", args)
		if err != nil {
			b.Fatal(err)
		}
		if r["truncated"] != true {
			b.Fatal("a 1 MiB page within 100000 characters?")
		}
	}
	close(stop)
	<-done
	if p := peak.Load(); p > base {
		b.ReportMetric(float64(p-base)/(1<<20), "peak-heap-MiB")
	}
}

// heapLive is the bytes of live and not yet swept heap objects.
func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
