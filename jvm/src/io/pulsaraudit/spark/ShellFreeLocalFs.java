package io.pulsaraudit.spark;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * The local file system of Hadoop's {@code FileContext} ({@code fs.AbstractFileSystem.file.impl},
 * what Delta's log store and Spark's streaming checkpoints rename with) over
 * {@link ShellFreeRawLocalFileSystem}: Hadoop's {@code LocalFs}, checksummed, without a child
 * process per file created or renamed.
 */
public class ShellFreeLocalFs extends ChecksumFs {
  public ShellFreeLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(new Raw(conf)); // the URI given is file:///, as Hadoop's LocalFs takes it
  }

  @Override
  public int getUriDefaultPort() {
    return -1; // no default port for file:///
  }

  /** Hadoop's {@code RawLocalFs}, delegating to {@link ShellFreeRawLocalFileSystem}. */
  static final class Raw extends DelegateToFileSystem {
    Raw(Configuration conf) throws IOException, URISyntaxException {
      super(FsConstants.LOCAL_FS_URI, new ShellFreeRawLocalFileSystem(), conf,
          FsConstants.LOCAL_FS_URI.getScheme(), false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1; // no default port for file:///
    }

    @Override
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults(); // what FileContext's create and open ask
    }

    @Override
    public boolean isValidName(String src) {
      return true; // as Hadoop's RawLocalFs: the local file system says what a name may be
    }
  }
}
