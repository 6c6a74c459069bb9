module github.com/dolthub/go-icu-regex

go 1.23

require gopkg.in/src-d/go-errors.v1 v1.0.0
