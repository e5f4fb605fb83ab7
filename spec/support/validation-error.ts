/** The `ValidationError` a call throws; fails the test when it throws nothing or something else. */
import { expect } from 'chai';
import { ValidationError } from '../../lib/errors.ts';

export function validationErrorOf(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error('expected a ValidationError');
}
