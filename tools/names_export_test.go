package tools

// DomainLabel is the label of a Company's domain in its tools' names.
var DomainLabel = domainLabel
