/**
 * Herald's CommonJS entry (`require('herald')`): the ES module build itself,
 * loaded with require(esm), which every Node version Herald supports has.
 */
import herald = require('./index.ts');
export = herald;
