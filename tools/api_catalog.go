package tools

// This file loads the catalogs of a Company's OpenAPI APIs (Poppy 0.1 §6:
// an openapi entry's url is an OpenAPI document; calls go to its servers).
// Documents are public: they are fetched like discovery's, through
// the Server's discovery.Client and so the HTTP cache (§3: "SHOULD cache ... according to its HTTP caching headers"), and
// the translated catalog is kept in memory and in the store under the
// document's URL, versioned by its ETag (else its SHA-256), so a second
// start with an unchanged document asks with If-None-Match and reuses the
// stored catalog without translating again.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/catalogstore"
	"github.com/poppy-mcp/poppy-mcp/openapi2tools"
	"github.com/poppy-mcp/poppy-mcp/store"
)

const (
	// maxAPIDocument bounds an OpenAPI document: what openapi2tools
	// translates (64 MiB; Microsoft Graph beta's is 45). Discovery's own
	// documents keep their 1 MiB.
	maxAPIDocument = openapi2tools.MaxDocumentBytes
	// apiLoadTimeout bounds fetching and translating one document.
	apiLoadTimeout = 30 * time.Second
	// catalogFormat versions what the store holds beside openapi2tools' own
	// format: bump it when the options of loadCatalog change.
	catalogFormat = "v1"
)

// loadedCatalog is a translated document and the version it came from.
type loadedCatalog struct {
	version string // the document's ETag, or "sha256:" and its hash
	cat     *openapi2tools.Catalog
}

// companyAPI is one openapi entry of a Company with its catalog.
type companyAPI struct {
	entry  discovery.API
	prefix string                 // of its tool names
	cat    *openapi2tools.Catalog // nil when err is set
	err    error                  // why the document could not be used
}

// companyPrefix is the prefix of the tools of the Company's first OpenAPI
// API, whichever host the User typed for it.
func companyPrefix(co *discovery.Company) string { return apiPrefix(co, 1) }

// apiPrefix is the prefix of the tools of the Company's n-th OpenAPI API
// (from 1): "_api_", then "_api2_" and so on, after its domain label.
func apiPrefix(co *discovery.Company, n int) string { return toolPrefix(orgDomain(co), kindAPI, n) }

// APIToolPrefix is the prefix of the tools of the first OpenAPI API of a
// Company at domain (example.com: "example_com_api_", and the same for
// example.com:8443, as tools/list names them), as docs/tools.md says:
// short, unique per Company, the same on every run, and apart from the
// relayed MCP tools ("example_com_mcp_", relay.go), with the same label
// (names.go).
func APIToolPrefix(domain string) string { return toolPrefix(companyDomain(domain), kindAPI, 1) }

// load returns the Company's openapi entries with their catalogs. An entry
// whose document cannot be used carries the error.
func (ap *apis) load(ctx context.Context, co *discovery.Company) []*companyAPI {
	if co == nil || co.Document == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiLoadTimeout)
	defer cancel()
	var out []*companyAPI
	for _, e := range co.Document.APIs {
		if e.Type != "openapi" {
			continue // Poppy 0.1 §6: "Personal Agents SHOULD skip API types they don't recognize"
		}
		a := &companyAPI{entry: e, prefix: apiPrefix(co, len(out)+1)} // names of several APIs never collide
		a.cat, a.err = ap.catalog(ctx, e, a.prefix)
		if a.err != nil {
			ap.log.InfoContext(ctx, "OpenAPI document unusable", "url", e.URL, "err", a.err)
		}
		out = append(out, a)
	}
	return out
}

// catalogKey identifies a translation: the same document with another
// prefix or resource is another catalog.
func catalogKey(u, prefix, resource string) string {
	return strings.Join([]string{catalogFormat, u, "prefix=" + prefix, "resource=" + resource}, " ")
}

// catalog returns the translated document of an openapi entry: the one in
// memory or in the store when the document has not changed, else a new
// translation, which is then stored.
func (ap *apis) catalog(ctx context.Context, e discovery.API, prefix string) (*openapi2tools.Catalog, error) {
	key := catalogKey(e.URL, prefix, e.Resource)
	ap.mu.Lock()
	mem := ap.catalogs[key]
	ap.mu.Unlock()
	stored := ap.storedCatalog(ctx, e.URL, key, mem)
	version, data, err := ap.fetchDocument(ctx, e.URL, mem, stored)
	if err != nil {
		return nil, err
	}
	var lc *loadedCatalog
	switch {
	case mem != nil && mem.version == version:
		return mem.cat, nil
	case stored != nil && stored.version == version:
		lc = stored
	default:
		if data == nil { // 304 without a stored catalog: cannot happen, but never trust it
			return nil, errors.New("the Company answered 304 to a request that was not conditional")
		}
		cat, err := loadCatalog(ctx, data, e.URL, prefix, e.Resource, ap.log.Info)
		if err != nil {
			return nil, err
		}
		lc = &loadedCatalog{version: version, cat: cat}
		ap.storeCatalog(ctx, e.URL, key, lc)
	}
	ap.mu.Lock()
	ap.catalogs[key] = lc
	ap.mu.Unlock()
	return lc.cat, nil
}

// loadCatalog translates a document as poppy-mcp announces it.
func loadCatalog(ctx context.Context, data []byte, docURL, prefix, resource string, logf func(string, ...any)) (*openapi2tools.Catalog, error) {
	opts := &openapi2tools.Options{Prefix: prefix, Resource: resource}
	if logf != nil {
		opts.Logf = func(format string, args ...any) {
			logf("OpenAPI operation skipped", "detail", fmt.Sprintf(format, args...))
		}
	}
	return openapi2tools.Load(ctx, data, docURL, opts)
}

// storedCatalog returns the catalog the store holds for the translation
// key, or nil. It is not read when memory already has a catalog.
func (ap *apis) storedCatalog(ctx context.Context, u, key string, mem *loadedCatalog) *loadedCatalog {
	if mem != nil || ap.store == nil {
		return nil
	}
	version, data, err := catalogstore.Get(ctx, ap.store, u, key)
	if err != nil { // not kept, or under another prefix, resource or format
		if !errors.Is(err, store.ErrNotFound) {
			ap.log.InfoContext(ctx, "could not read a stored catalog", "url", u, "err", err)
		}
		return nil
	}
	cat, err := openapi2tools.UnmarshalCatalog(data)
	if err != nil {
		ap.log.InfoContext(ctx, "stored catalog unreadable; translating again", "url", u, "err", err)
		return nil
	}
	return &loadedCatalog{version: version, cat: cat}
}

// storeCatalog keeps lc in the store for the next start.
func (ap *apis) storeCatalog(ctx context.Context, u, key string, lc *loadedCatalog) {
	if ap.store == nil {
		return
	}
	data, err := lc.cat.MarshalBinary()
	if err == nil {
		err = catalogstore.Put(ctx, ap.store, u, key, lc.version, data)
	}
	if err != nil {
		ap.log.InfoContext(ctx, "could not store a catalog", "url", u, "err", err)
	}
}

// fetchDocument GETs an OpenAPI document through discovery's fetcher of
// public documents (so the HTTP cache, HTTPS-only redirects, the 429 holds
// and a deadline of its own) and returns its version and body. With only a
// stored catalog (a new start), it asks with If-None-Match, and a 304
// returns the stored version and no body. A document whose ETag matches the
// one in memory is not read.
func (ap *apis) fetchDocument(ctx context.Context, u string, mem, stored *loadedCatalog) (string, []byte, error) {
	r := discovery.DocumentRequest{URL: u, Accept: "application/json, application/yaml;q=0.9, */*;q=0.1", MaxBytes: maxAPIDocument}
	switch {
	case mem != nil && isETag(mem.version):
		r.KnownETag = mem.version
	case stored != nil && isETag(stored.version):
		// RFC 9110 §13.1.2: the Company answers 304 while the document is unchanged.
		r.IfNoneMatch = stored.version
	}
	f, err := ap.companies.disc.FetchDocument(ctx, r)
	if err != nil {
		return "", nil, fmt.Errorf("the OpenAPI document could not be fetched: %w", err)
	}
	switch {
	case f.NotModified && r.KnownETag != "":
		return mem.version, nil, nil
	case f.NotModified:
		return stored.version, nil, nil
	}
	if !documentMediaType(f.Header.Get("Content-Type")) {
		return "", nil, fmt.Errorf("the OpenAPI document %s is %q, not JSON or YAML", u, f.Header.Get("Content-Type"))
	}
	etag := f.Header.Get("ETag")
	if !isETag(etag) {
		sum := sha256.Sum256(f.Body)
		etag = "sha256:" + hex.EncodeToString(sum[:])
	}
	return etag, f.Body, nil
}

// isETag reports whether v is an entity tag, strong or weak (RFC 9110 §8.8.3).
func isETag(v string) bool {
	v = strings.TrimPrefix(v, "W/")
	return len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"'
}

// documentMediaType reports whether an OpenAPI document may have this
// Content-Type: JSON or YAML, or text/plain as raw file hosts serve them.
func documentMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case mt == "application/json", mt == "text/plain", strings.HasSuffix(mt, "+json"),
		strings.HasSuffix(mt, "/yaml"), strings.HasSuffix(mt, "/x-yaml"), strings.HasSuffix(mt, "+yaml"):
		return true
	}
	return false
}
