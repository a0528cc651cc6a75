package web

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"codeberg.org/readeck/go-readability/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
)

// Extract turns an HTML page into the Markdown of its main content (a
// readability port finds it: the article, not the menus, footers, scripts
// and trackers) and its title. Links are made absolute against page. A
// page whose main content cannot be found is converted whole, scripts and
// styles left out.
func Extract(body []byte, page *url.URL) (title, markdown string, err error) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return "", "", fmt.Errorf("parse the page: %w", err)
	}
	preClean(doc)
	parser := readability.NewParser()
	art, perr := parser.ParseAndMutate(doc, page)
	node := art.Node
	title = strings.TrimSpace(art.Title())
	if perr != nil || node == nil {
		// No main content found: the whole page, without what is not text.
		doc, err = html.Parse(bytes.NewReader(body))
		if err != nil {
			return "", "", fmt.Errorf("parse the page: %w", err)
		}
		preClean(doc)
		dropTags(doc, "script", "style", "noscript", "template", "iframe", "svg")
		node = doc
		if title == "" {
			title = findTitle(doc)
		}
	}
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(), commonmark.NewCommonmarkPlugin(), table.NewTablePlugin(), strikethrough.NewStrikethroughPlugin()))
	md, err := conv.ConvertNode(node, converter.WithDomain(page.String()))
	if err != nil {
		return "", "", fmt.Errorf("convert the page to Markdown: %w", err)
	}
	return title, strings.TrimSpace(string(md)), nil
}

// preClean removes what readability keeps but a reader does not want:
// tracking pixels (images of 0 or 1 pixel) and heading permalinks
// (Sphinx's and MkDocs' "¶").
func preClean(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode && (isPixel(c) || isPermalink(c)) {
			n.RemoveChild(c)
		} else {
			preClean(c)
		}
		c = next
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func isPixel(n *html.Node) bool {
	if n.Data != "img" {
		return false
	}
	tiny := func(v string) bool { v = strings.TrimSuffix(strings.TrimSpace(v), "px"); return v == "0" || v == "1" }
	return tiny(attr(n, "width")) || tiny(attr(n, "height"))
}

func isPermalink(n *html.Node) bool {
	if n.Data != "a" || !strings.HasPrefix(attr(n, "href"), "#") {
		return false
	}
	for _, c := range strings.Fields(attr(n, "class")) {
		if c == "headerlink" || c == "anchor" || c == "headeranchor" {
			return true
		}
	}
	return n.FirstChild != nil && n.FirstChild == n.LastChild && n.FirstChild.Type == html.TextNode &&
		(strings.TrimSpace(n.FirstChild.Data) == "¶" || strings.TrimSpace(n.FirstChild.Data) == "#")
}

// dropTags removes every element named in tags.
func dropTags(n *html.Node, tags ...string) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode && containsTag(tags, c.Data) {
			n.RemoveChild(c)
		} else {
			dropTags(c, tags...)
		}
		c = next
	}
}

func containsTag(tags []string, t string) bool {
	for _, s := range tags {
		if s == t {
			return true
		}
	}
	return false
}

// findTitle returns the text of the first <title>.
func findTitle(n *html.Node) string {
	if n.Type == html.ElementNode && n.Data == "title" && n.FirstChild != nil {
		return strings.TrimSpace(n.FirstChild.Data)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := findTitle(c); t != "" {
			return t
		}
	}
	return ""
}
