/**
 * The script a loader's workers run (ts/thread/loader.ts starts them; in
 * the npm package, dist/loader_worker.js): this copy's exports registered
 * first in the worker's realm (ts/npm.ts), so that a producer importing
 * the library through the npm package's entry, from this install or
 * another one of the same version, gets the classes the worker copies
 * with; then the worker itself (ts/thread/loader_worker.ts).
 *
 * @module
 */

import "./npm.ts";
import "./thread/loader_worker.ts";
