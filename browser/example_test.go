package browser_test

import (
	"context"
	"fmt"
	"log"

	"github.com/poppy-mcp/poppy-mcp/browser"
)

// The agent's own browser opens a page and reads its text. (Not run: it
// needs Chromium.)
func Example() {
	path, err := browser.Find()
	if err != nil {
		log.Fatal(err)
	}
	b, err := browser.New(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	page, err := b.Open(context.Background(), "https://example.com/", false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(page.Title, page.URL)
}
