module github.com/apodex/apodex

go 1.26.8
