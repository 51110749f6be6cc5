// Package catalogstore keeps in the state the API catalogs poppy-mcp
// translated from Companies' OpenAPI documents (openapi2tools), so that a
// restart does not translate them again: one blob per document URL, whose
// version is the translation key (prefix, resource and format) and the
// document's version. A catalog holds nothing of anyone's: the people of a
// hosted state share them, and only `poppy-mcp forget` of the whole state
// deletes them (docs/tools.md "Commands").
package catalogstore

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// Get returns the catalog st keeps for the document at docURL translated
// under key, and the document's version; an error matching
// store.ErrNotFound when none is kept, or one under another key.
func Get(ctx context.Context, st *store.Store, docURL, key string) (version string, data []byte, err error) {
	v, data, err := st.Blob(ctx, docURL)
	if err != nil {
		return "", nil, err
	}
	keyPart, version, ok := strings.Cut(v, "\n")
	if !ok || keyPart != key {
		return "", nil, fmt.Errorf("catalogstore: the catalog of %s was translated under another key: %w", docURL, store.ErrNotFound)
	}
	return version, data, nil
}

// Put keeps the catalog data of the document at docURL, at version,
// translated under key, in place of any other.
func Put(ctx context.Context, st *store.Store, docURL, key, version string, data []byte) error {
	return st.PutBlob(ctx, docURL, key+"\n"+version, data)
}

// ForgetCompany deletes the catalogs of a Company's documents: those kept
// under one of apiURLs (the OpenAPI URLs its poppy.json names), or at an
// https URL on one of its domains or a host under one (api.example.com).
// It returns how many it deleted.
func ForgetCompany(ctx context.Context, st *store.Store, apiURLs, domains []string) (int, error) {
	names, err := st.BlobNames(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if !slices.Contains(apiURLs, name) && !onDomains(name, domains) {
			continue
		}
		if err := st.DeleteBlob(ctx, name); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// onDomains reports whether rawURL is an https URL on one of domains or a
// host under one.
func onDomains(rawURL string, domains []string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" {
		return false
	}
	host := strings.ToLower(u.Host)
	return slices.ContainsFunc(domains, func(d string) bool { return host == d || strings.HasSuffix(host, "."+d) })
}
