//go:build !unix

package openapi2tools

// maxRSS is unknown here: the peak memory metrics read 0.
func maxRSS() int64 { return 0 }
