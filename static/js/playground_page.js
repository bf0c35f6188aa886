// /playground: the online-softmax playground on a page of its own.
import { initPlaygrounds } from './playground.js';

initPlaygrounds();
