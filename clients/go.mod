// clients/ holds the TypeScript client and the reference mini-program, no Go. This file only keeps
// their node_modules out of the slotwheel module: some npm packages ship .go files (flatted does),
// which `go vet ./...` and staticcheck would otherwise try to build as slotwheel packages.
module github.com/slotwheel/slotwheel/clients

go 1.26
