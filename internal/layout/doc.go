// Package layout holds the checks of the code's own shape that its tests
// enforce: no function over 80 lines outside tests, no package under api/
// reaching past the dispatcher into the data layer (internal/query and its
// packages), the data layer's concerns importing its base and not each other
// (TestDataLayerConcernsApart), no hand-written INSERT into effectd's tables
// outside internal/fixture and migrations/ (TestRowsThroughTheFixtureFactory),
// effectdtype, the shared types, importing only the standard library
// (TestSharedTypesImportOnlyTheStandardLibrary), and no exported function
// outside constructors taking a *pgxpool.Pool
// (TestNoExportedFunctionTakesAPool); and of
// the documentation's: README.md at most 300 lines and linking every docs/
// page, every relative link resolving, and every command and test the pages
// name existing.
package layout
