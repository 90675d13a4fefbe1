// Package layout holds the checks of the code's own shape that its tests
// enforce: no function over 80 lines outside tests, and no package under api/
// reaching past the dispatcher into the data layer (internal/query).
package layout
