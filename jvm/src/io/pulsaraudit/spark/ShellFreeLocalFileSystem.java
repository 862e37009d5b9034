package io.pulsaraudit.spark;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * The local file system ({@code fs.file.impl}) over {@link ShellFreeRawLocalFileSystem}: the
 * same checksummed local files, without a child process per file created or renamed.
 */
public class ShellFreeLocalFileSystem extends LocalFileSystem {
  public ShellFreeLocalFileSystem() {
    super(new ShellFreeRawLocalFileSystem());
  }
}
