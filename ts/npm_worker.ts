/**
 * The npm package's loader worker script (dist/loader_worker.js): this
 * copy's exports registered first in the worker's realm (ts/npm.ts), so a
 * producer that imports the package, from this install or another one of
 * the same version, gets the classes the worker copies with; then the
 * worker itself (ts/thread/loader_worker.ts).
 *
 * @module
 */

import "./npm.ts";
import "./thread/loader_worker.ts";
